"""Operator commands: dead letters, limits, usage and audit over the API (an admin key);
tenant API keys in the tenants table (AWS credentials and ``PAGEFLEET_TENANTS_TABLE``), each
key created, rotated or revoked leaving an audit record that names the AWS identity."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from pagefleet.cli.common import ApiKey, ApiUrl, CliError, api_client, aws, console
from pagefleet.tenancy import api_keys

admin_app = typer.Typer(
    help=(
        "Operators: API keys (PAGEFLEET_TENANTS_TABLE and AWS credentials); limits, usage and "
        "the audit log (an admin API key)."
    )
)


def dead_letters(
    redrive: Annotated[
        bool, typer.Option("--redrive", help="Send every dead-lettered job back to its queue.")
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Dead-lettered jobs of every tenant (needs an admin key); --redrive sends them back."""
    with api_client(api_url, api_key) as client:
        if redrive:
            done = client.redrive()
            console.print(f"redriven: {len(done)} job(s)")
            return
        listed = client.dead_letters()
    table = Table("job", "error", "updated")
    table.columns[0].no_wrap = True
    for job in listed:
        table.add_row(job.job_id, job.error.message if job.error else "", job.updated_at or "")
    console.print(table)


TenantsTable = Annotated[
    str | None, typer.Option("--tenants-table", envvar="PAGEFLEET_TENANTS_TABLE")
]


def _tenant_store(table: str | None) -> Any:
    if not table:
        raise CliError("no tenants table: pass --tenants-table or set PAGEFLEET_TENANTS_TABLE")
    return aws().tenant_store(table)


def _audit(table: str | None, action: Any, tenant: str, key_id: str) -> None:
    """Record a key action, naming the AWS identity that ran the command."""
    from pagefleet.tenancy.service import record  # +0.14 s: for the key commands only

    try:
        who = "cli:" + str(aws().client("sts").get_caller_identity()["Arn"])
    except Exception:
        who = "cli:unknown"
    record(aws().audit_log(str(table)), who, action, tenant_id=tenant, target=key_id)


@admin_app.command("create-key")
def create_key(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    name: Annotated[str, typer.Option("--name")] = "default",
    admin: Annotated[bool, typer.Option("--admin", help="Grant admin rights.")] = False,
    tenants_table: TenantsTable = None,
) -> None:
    """Create an API key; the key is shown once."""
    store = _tenant_store(tenants_table)
    key, record = api_keys.create_api_key(store, tenant, name=name, admin=admin)
    _audit(tenants_table, "key.created", tenant, record.key_id)
    console.print(
        f"tenant [bold]{record.tenant_id}[/] key id [bold]{record.key_id}[/] (shown once):"
    )
    sys.stdout.write(key + "\n")


@admin_app.command("list-keys")
def list_keys(
    tenant: Annotated[str, typer.Option("--tenant")], tenants_table: TenantsTable = None
) -> None:
    """List a tenant's keys (ids only; keys are stored hashed)."""
    table = Table("key id", "name", "created", "admin", "revoked")
    for _, rec in _tenant_store(tenants_table).keys_of(tenant):
        table.add_row(rec.key_id, rec.name, rec.created_at, str(rec.admin), str(rec.revoked))
    console.print(table)


@admin_app.command("revoke-key")
def revoke_key(
    tenant: Annotated[str, typer.Option("--tenant")],
    key_id: Annotated[str, typer.Option("--key-id")],
    tenants_table: TenantsTable = None,
) -> None:
    """Revoke a key (API Gateway may honour a cached authorization for up to 5 minutes)."""
    api_keys.revoke_key(_tenant_store(tenants_table), tenant, key_id)
    _audit(tenants_table, "key.revoked", tenant, key_id)
    console.print(f"revoked key {key_id} of tenant {tenant}")


@admin_app.command("rotate-key")
def rotate_key(
    tenant: Annotated[str, typer.Option("--tenant")],
    key_id: Annotated[str, typer.Option("--key-id")],
    tenants_table: TenantsTable = None,
) -> None:
    """Issue a new key with the same name and rights, and revoke the old one."""
    key, record = api_keys.rotate_key(_tenant_store(tenants_table), tenant, key_id)
    _audit(tenants_table, "key.rotated", tenant, key_id)
    console.print(f"new key id [bold]{record.key_id}[/] (shown once); {key_id} revoked:")
    sys.stdout.write(key + "\n")
