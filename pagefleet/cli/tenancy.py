"""Tenant commands over the API: limits, usage and cost, deletion, saved logins; and the
operator's side (an admin key): set-limits, every tenant's usage, the audit log."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from pagefleet.cli.common import ApiKey, ApiUrl, AsJson, CliError, api_client, console
from pagefleet.tenancy.views import TenantView, UsageLine

sessions_app = typer.Typer(help="Saved login sessions (save_session / use_session).")

From = Annotated[str | None, typer.Option("--from", help="First day, YYYY-MM-DD (UTC).")]
To = Annotated[str | None, typer.Option("--to", help="Last day, YYYY-MM-DD (UTC).")]


def _money(line: UsageLine, region: str) -> str:
    priced = line.cost.get(region)
    return f"${priced.total_usd:.4f}" if priced else "-"


def _usage_table(first_column: str, lines: list[tuple[str, UsageLine]]) -> Table:
    table = Table(
        first_column, "jobs", "attempts", "browser-s", "requests", "MB", "us-east-1", "ap-south-1"
    )
    for label, line in lines:
        table.add_row(
            label,
            str(line.jobs),
            str(line.attempts),
            f"{line.browser_seconds:.1f}",
            str(line.page_requests),
            f"{line.artifact_bytes / 1e6:.2f}",
            _money(line, "us-east-1"),
            _money(line, "ap-south-1"),
        )
    return table


def usage(
    first: From = None,
    last: To = None,
    job: Annotated[str | None, typer.Option("--job", help="One job's attempts instead.")] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Usage and its cost in us-east-1 and ap-south-1, per day and workflow."""
    with api_client(api_url, api_key) as client:
        if job is not None:
            one = client.job_usage(job)
            if as_json:
                console.print_json(one.model_dump_json())
                return
            console.print(_usage_table("job", [(one.job_id, one.total)]))
            return
        report = client.usage(first, last)
    if as_json:
        console.print_json(report.model_dump_json())
        return
    console.print(f"[bold]{report.tenant_id}[/] {report.first_day} .. {report.last_day}")
    rows = [(d.day or "", d) for d in report.days] + [("total", report.total)]
    console.print(_usage_table("day", rows))
    if report.workflows:
        console.print(_usage_table("workflow", [(w.workflow or "", w) for w in report.workflows]))
    console.print(f"prices as of {report.prices.as_of} ({report.prices.currency})")


def _print_tenant(view: TenantView) -> None:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    limits = view.limits.model_dump()
    for name, value in limits.items():
        mark = "" if name in view.overrides else "  (stage default)"
        table.add_row(name, f"{value}{mark}")
    for name, value in view.usage.model_dump().items():
        table.add_row(name, str(value))
    console.print(f"tenant [bold]{view.tenant_id}[/]")
    console.print(table)


def tenant(api_url: ApiUrl = None, api_key: ApiKey = None, as_json: AsJson = False) -> None:
    """Your limits and what you use right now (running, queued, this minute's submissions)."""
    with api_client(api_url, api_key) as client:
        view = client.tenant()
    if as_json:
        console.print_json(view.model_dump_json())
    else:
        _print_tenant(view)


def delete(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Delete a job: its record, events and every attempt's artifacts (cancelled first)."""
    with api_client(api_url, api_key) as client:
        done = client.delete(job_id)
    if done.status == "deleted":
        console.print(f"[bold]{job_id}[/] deleted ({done.artifacts_deleted} artifacts)")
    else:
        console.print(f"[bold]{job_id}[/] cancelled; it is deleted as soon as it has stopped")


@sessions_app.command("list")
def list_sessions(api_url: ApiUrl = None, api_key: ApiKey = None, as_json: AsJson = False) -> None:
    """Your saved logins: when saved, when they expire."""
    with api_client(api_url, api_key) as client:
        found = client.saved_logins()
    if as_json:
        console.print_json(data=[s.model_dump() for s in found])
        return
    table = Table("session", "saved", "expires", "bytes")
    for s in found:
        expires = f"[red]expired {s.expires_at}[/]" if s.expired else (s.expires_at or "")
        table.add_row(s.name, s.saved_at or "", expires, str(s.size))
    console.print(table)


@sessions_app.command("delete")
def delete_session(
    name: Annotated[str, typer.Argument(help="Session name.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Delete a saved login (no error if there is none)."""
    with api_client(api_url, api_key) as client:
        client.delete_saved_login(name)
    console.print(f"session {name} deleted")


# --- operators (admin key) ------------------------------------------------------------------------
Tenant = Annotated[str, typer.Option("--tenant", help="Tenant id.")]


def set_limits(
    tenant_id: Tenant,
    submits_per_minute: Annotated[int | None, typer.Option(min=1)] = None,
    burst: Annotated[int | None, typer.Option(min=1, help="Defaults to the rate.")] = None,
    max_queued: Annotated[int | None, typer.Option(min=1)] = None,
    max_running: Annotated[int | None, typer.Option(min=1)] = None,
    allow_evaluate: Annotated[bool | None, typer.Option("--allow-evaluate/--no-allow-evaluate")] = (
        None
    ),
    retention_days: Annotated[int | None, typer.Option(min=1)] = None,
    session_days: Annotated[int | None, typer.Option(min=1)] = None,
    trace: Annotated[
        str | None,
        typer.Option(
            help="When the tenant's jobs that do not say record a trace: off, on, "
            "retain-on-failure, on-first-retry, on-all-retries, retain-on-first-failure."
        ),
    ] = None,
    pool: Annotated[
        list[str] | None,
        typer.Option(
            "--pool", help="A worker pool its jobs may run in (repeatable; the others refused)."
        ),
    ] = None,
    reset: Annotated[
        list[str] | None, typer.Option("--reset", help="Back to the stage default (repeatable).")
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Change a tenant's limits (an admin key; limits left out keep their value)."""
    change: dict[str, Any] = {
        name: value
        for name, value in {
            "submits_per_minute": submits_per_minute,
            "burst": burst,
            "max_queued": max_queued,
            "max_running": max_running,
            "allow_evaluate": allow_evaluate,
            "retention_days": retention_days,
            "session_days": session_days,
            "trace": trace,
            "pools": pool or None,
        }.items()
        if value is not None
    }
    if reset:
        change["reset"] = [name.replace("-", "_") for name in reset]
    if not change:
        raise CliError("name at least one limit to change (see --help)")
    with api_client(api_url, api_key) as client:
        view = client.set_limits(tenant_id, **change)
    if as_json:
        console.print_json(view.model_dump_json())
    else:
        _print_tenant(view)


def limits(
    tenant_id: Tenant, api_url: ApiUrl = None, api_key: ApiKey = None, as_json: AsJson = False
) -> None:
    """A tenant's limits and current usage (an admin key)."""
    with api_client(api_url, api_key) as client:
        view = client.tenant_of(tenant_id)
    if as_json:
        console.print_json(view.model_dump_json())
    else:
        _print_tenant(view)


def every_tenant_usage(
    first: From = None,
    last: To = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Every tenant's usage and cost over a period (an admin key)."""
    with api_client(api_url, api_key) as client:
        report = client.tenants_usage(first, last)
    if as_json:
        console.print_json(report.model_dump_json())
        return
    rows = [(t.tenant_id or "", t) for t in report.tenants] + [("total", report.total)]
    console.print(f"{report.first_day} .. {report.last_day}")
    console.print(_usage_table("tenant", rows))


def audit(
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    before: Annotated[str | None, typer.Option(help="Older than this audit id.")] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Audit records, newest first: keys, limits, redrives, deletions (an admin key)."""
    with api_client(api_url, api_key) as client:
        page = client.audit(limit, before)
    if as_json:
        console.print_json(page.model_dump_json())
        return
    table = Table("when", "who", "what", "tenant", "target")
    for record in page.records:
        table.add_row(
            record.at, record.actor, record.action, record.tenant_id or "", record.target or ""
        )
    console.print(table)
    if page.next_before:
        console.print(f"older: --before {page.next_before}")
