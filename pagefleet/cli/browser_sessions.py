"""``pagefleet browser-sessions``: the tenant's open browser sessions, and closing one."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from pagefleet.cli.common import ApiKey, ApiUrl, AsJson, api_client, console

browser_sessions_app = typer.Typer(
    help="Open browser sessions: list them with their cost so far, close one."
)

Status = Annotated[
    str,
    typer.Option(
        "--status", help="open (starting and ready), starting or ready", case_sensitive=False
    ),
]


@browser_sessions_app.command("list")
def list_open(
    status: Status = "open",
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Sessions still open: their cost so far and last activity (close forgotten ones)."""
    with api_client(api_url, api_key) as client:
        found = client.open_sessions(status)
    if as_json:
        console.print_json(data=[s.model_dump() for s in found])
        return
    table = Table("session", "status", "started", "last activity", "cost so far", "cap")
    for s in found:
        cap = f"${s.max_cost_usd:.4f}" if s.max_cost_usd is not None else "-"
        table.add_row(
            s.session_id,
            s.status,
            s.started_at or "",
            s.last_activity_at or "",
            f"${s.cost_usd:.4f}",
            cap,
        )
    console.print(table)


@browser_sessions_app.command("close")
def close(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Close a browser session (idempotent): its slot is released at once."""
    with api_client(api_url, api_key) as client:
        view = client.close_session(session_id)
    console.print(f"session {session_id} {view.status} ({view.closed_reason or view.status})")
