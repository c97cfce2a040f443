"""``pagefleet follow ID`` and ``submit FILE --follow``: a job's progress as it happens.

Exit codes once the job ends (README, "Follow a job live"): 0 succeeded, 1 failed,
4 timed_out, 5 cancelled, 6 expired, 7 dead_lettered, 9 needs_review; 8 if ``--timeout``
passed while the job still ran; 2 bad input and 3 API errors as for every command.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from pagefleet.cli import render
from pagefleet.cli.common import ApiKey, ApiUrl, AsJson, api_client, console
from pagefleet.client import PagefleetClient
from pagefleet.client.follow import FollowItem, StatusUpdate
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import EventType, RunEvent

EXIT_BY_STATUS = {
    JobStatus.SUCCEEDED: 0,
    JobStatus.FAILED: 1,
    JobStatus.TIMED_OUT: 4,
    JobStatus.CANCELLED: 5,
    JobStatus.EXPIRED: 6,
    JobStatus.DEAD_LETTERED: 7,
    JobStatus.NEEDS_REVIEW: 9,
}
EXIT_STILL_RUNNING = 8


def describe(item: FollowItem) -> str | None:
    """One line of progress (rich markup, user text escaped), or None for nothing to show."""
    if isinstance(item, StatusUpdate):
        text = f"[bold]{item.status.value}[/]"
        if item.status is JobStatus.RUNNING:
            text += f" (attempt {item.attempt})"
        if item.error is not None:
            text += f": {escape(item.error.message)}"
        return text
    return _event_line(item)


def _took(event: RunEvent) -> str:
    """A finished step's time and its share of the job's price, when known."""
    spent = [f"{event.duration_ms} ms"] if event.duration_ms is not None else []
    if event.cost_usd is not None:
        spent.append(f"${event.cost_usd:.7f}")
    return f" ({', '.join(spent)})" if spent else ""


def _event_line(event: RunEvent) -> str | None:
    kind = event.type
    where = f"step {event.index + 1}/{event.of}" if event.index is not None and event.of else "step"
    if kind is EventType.STEP_STARTED:
        return f"{where} [cyan]{escape(event.label or event.action or '')}[/]"
    if kind is EventType.STEP_FINISHED:
        took = _took(event)
        if event.outcome == "ok":
            return f"  [green]✓[/] {where} {escape(event.action or '')}{took}"
        return (
            f"  [red]✗[/] {where} {escape(event.action or '')}{took}: {escape(event.message or '')}"
        )
    if kind is EventType.NAVIGATION:
        return f"  → {escape(event.url or '')}"
    if kind is EventType.RETRY:
        delay = f" in {event.delay_s} s" if event.delay_s is not None else ""
        return f"[yellow]retry{delay}[/]: {escape(event.reason or '')}"
    if kind is EventType.LOG:
        return f"  [dim]log {event.level}:[/] {escape(event.message or '')}"
    if kind in (EventType.CONSOLE, EventType.PAGE_ERROR):
        return f"  [magenta]console.{event.level}:[/] {escape(event.message or '')}"
    if kind is EventType.DIALOG:
        return f"  [blue]{event.dialog} dialog {event.outcome}:[/] {escape(event.message or '')}"
    if kind is EventType.TRUNCATED:
        return f"[yellow]{escape(event.message or 'events were dropped')}[/]"
    if kind is EventType.CHECKPOINT:
        return (
            f"  [bold]◆[/] {where} {escape(event.label or '')}: "
            f"[bold]{event.state}[/] ({event.how})"
        )
    if kind is EventType.COMPENSATION:
        failed = f": {escape(event.message)}" if event.message else ""
        return f"[magenta]compensation {event.state}[/]{failed}"
    return None  # state events repeat the status lines


def follow_job(
    client: PagefleetClient,
    job_id: str,
    *,
    after: int = 0,
    timeout: float | None = None,
    live: bool = True,
    as_json: bool = False,
) -> int:
    """Print the job's progress until it ends; the exit code for its final state."""
    final: StatusUpdate | None = None
    try:
        for item in client.follow(job_id, after=after, timeout=timeout, live=live):
            if as_json:
                kind = "status" if isinstance(item, StatusUpdate) else "event"
                line = {"kind": kind, **item.model_dump(mode="json", exclude_none=True)}
                console.print_json(json.dumps(line))
            else:
                text = describe(item)
                if text is not None:
                    console.print(text, highlight=False, soft_wrap=True)
            if isinstance(item, StatusUpdate) and item.final:
                final = item
    except TimeoutError:
        console.print(f"[yellow]{job_id} is still running after {timeout:.0f} s[/]")
        return EXIT_STILL_RUNNING
    assert final is not None
    if not as_json:
        job = client.get(job_id)
        render.print_job(job)
        if job.artifacts:
            render.print_artifacts(client.artifacts(job_id))
    return EXIT_BY_STATUS.get(final.status, 1)


def follow(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    after: Annotated[int, typer.Option(help="Only events after this seq.", min=0)] = 0,
    timeout: Annotated[
        float | None, typer.Option(help="Give up after this many seconds (exit 8).")
    ] = None,
    live: Annotated[
        bool, typer.Option("--live/--poll", help="WebSocket (default) or poll the API.")
    ] = True,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Show a job's progress as it happens (steps, log lines, retries) until it ends.

    Exit code: 0 succeeded, 1 failed, 4 timed_out, 5 cancelled, 6 expired, 7 dead_lettered,
    9 needs_review, 8 still running at --timeout."""
    with api_client(api_url, api_key) as client:
        code = follow_job(client, job_id, after=after, timeout=timeout, live=live, as_json=as_json)
    raise typer.Exit(code)
