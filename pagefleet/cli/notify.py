"""Completion webhooks from the terminal: the tenant's commands over the API
(``pagefleet webhooks ...``) and the operator's signing-secret command (AWS credentials)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table

from pagefleet.cli.common import ApiKey, ApiUrl, AsJson, api_client, aws, console

webhooks_app = typer.Typer(help="Completion webhooks: signing secret, default URL, deliveries.")


@webhooks_app.command("secret")
def secret(
    rotate: Annotated[bool, typer.Option("--rotate", help="Replace it with a new one.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Print the tenant's signing secret (Pagefleet-Signature's HMAC key)."""
    with api_client(api_url, api_key) as client:
        sys.stdout.write(client.signing_secret(rotate=rotate) + "\n")


@webhooks_app.command("default")
def default(
    url: Annotated[str | None, typer.Argument(help="New default webhook URL.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="No default webhook.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Show, set or clear the webhook for jobs that set no ``notify``."""
    with api_client(api_url, api_key) as client:
        if clear or url is not None:
            current = client.set_default_webhook(None if clear else url)
        else:
            current = client.default_webhook()
    console.print(current or "no default webhook", highlight=False, markup=False)


@webhooks_app.command("deliveries")
def deliveries(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Every POST of the job's webhook: when, the answer, the next try."""
    with api_client(api_url, api_key) as client:
        attempts = client.deliveries(job_id)
    if as_json:
        console.print_json(data=[a.model_dump(mode="json") for a in attempts])
        return
    table = Table("attempt", "at", "status", "code", "next try", "error")
    for a in attempts:
        table.add_row(
            str(a.attempt),
            a.at,
            a.status,
            str(a.status_code or ""),
            f"{a.next_attempt_in_s} s" if a.next_attempt_in_s is not None else "",
            a.error or "",
        )
    console.print(table)


def admin_signing_secret(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    stage: Annotated[
        str,
        typer.Option(
            "--stage",
            envvar="PAGEFLEET_STAGE",
            help="The stage whose secret it is (dev, prod, ...): required, never assumed.",
        ),
    ],
    rotate: Annotated[bool, typer.Option("--rotate", help="Replace it with a new one.")] = False,
) -> None:
    """A tenant's webhook signing secret, from Secrets Manager (AWS credentials). Reading
    never creates one: a missing secret is an error, so a wrong stage is noticed."""
    from pagefleet.adapters.notify import signing_secret_id  # botocore: only when used

    secrets = aws().signing_secrets(stage)
    value = secrets.rotate(tenant) if rotate else secrets.stored(tenant)
    if value is None:
        sys.stderr.write(
            f"no signing secret for tenant {tenant!r} on stage {stage!r} "
            f"({signing_secret_id(stage, tenant)}): check --stage; the API makes one at the "
            "tenant's first webhook or `pagefleet webhooks secret`, or make one with --rotate\n"
        )
        raise typer.Exit(1)
    sys.stdout.write(value + "\n")
