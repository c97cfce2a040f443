"""``pagefleet workflows ...`` (named, versioned workflows) and ``pagefleet schedules ...``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from pagefleet.cli.common import (
    EXIT_FAILED,
    ApiKey,
    ApiUrl,
    AsJson,
    CliError,
    api_client,
    console,
)
from pagefleet.cli.jobs import load_workflow, parse_input

workflows_app = typer.Typer(help="Named workflows: immutable versions (name@1, name@2, ...).")
schedules_app = typer.Typer(help="Schedules: cron / rate / at, mirrored in EventBridge Scheduler.")


@workflows_app.command("push")
def push(
    file: Annotated[Path, typer.Argument(help="A workflow: steps, default inputs, options.")],
    name: Annotated[str, typer.Option("--name", help="The workflow's name.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Store FILE as the next version of the named workflow."""
    data = load_workflow(file)
    definition = {
        k: v
        for k, v in data.items()
        if k in ("steps", "inputs", "options", "description", "expect")
    }
    with api_client(api_url, api_key) as client:
        stored = client.put_workflow(name, definition)
    console.print(f"stored [bold]{stored.name}@{stored.version}[/]")


@workflows_app.command("list")
def list_workflows(api_url: ApiUrl = None, api_key: ApiKey = None, as_json: AsJson = False) -> None:
    """The tenant's workflows with their latest versions."""
    with api_client(api_url, api_key) as client:
        found = client.workflows()
    if as_json:
        console.print_json(found.model_dump_json())
        return
    table = Table("workflow", "latest version")
    for item in found.workflows:
        table.add_row(item.name, str(item.latest_version))
    console.print(table)


@workflows_app.command("show")
def show(
    reference: Annotated[str, typer.Argument(help="NAME or NAME@VERSION.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """A version's definition (the latest, with the list of versions, for a bare name)."""
    name, _, version = reference.partition("@")
    if version and not version.isdigit():
        raise CliError(f"expected NAME or NAME@VERSION, got {reference!r}")
    with api_client(api_url, api_key) as client:
        found = client.workflow(name, int(version) if version else None)
    console.print(f"[bold]{found.name}@{found.version}[/]  created {found.created_at}")
    if found.versions:
        console.print(f"versions: {', '.join(map(str, found.versions))}")
    console.print_json(data=found.definition)


@workflows_app.command("diff")
def diff(
    name: Annotated[str, typer.Argument(help="The workflow's name.")],
    from_version: Annotated[int, typer.Argument(help="The older version.", min=1)],
    to_version: Annotated[int, typer.Argument(help="The newer version.", min=1)],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """What changed between two versions (a unified diff of their definitions)."""
    with api_client(api_url, api_key) as client:
        found = client.workflow_diff(name, from_version, to_version)
    if as_json:
        console.print_json(found.model_dump_json())
    elif not found.changed:
        console.print(f"{name}@{from_version} and {name}@{to_version} are the same")
    else:
        console.print(found.diff, end="", markup=False, highlight=False)


@schedules_app.command("create")
def create(
    file: Annotated[
        Path,
        typer.Argument(
            help="The job each fire submits (steps or workflow), or a whole schedule (with job)."
        ),
    ],
    name: Annotated[str | None, typer.Option("--name")] = None,
    expression: Annotated[
        str | None, typer.Option("--expression", help="cron(...), rate(...) or at(...).")
    ] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", help="IANA time zone.")] = None,
    skip_overlap: Annotated[
        bool, typer.Option("--skip-overlap", help="Skip a fire while the last run is going.")
    ] = False,
    alert_after: Annotated[
        int | None,
        typer.Option("--alert-after", min=1, max=100, help="Alert after N failed runs in a row."),
    ] = None,
    input_values: Annotated[
        list[str] | None,
        typer.Option("--input", "-i", help="NAME=VALUE for the job's inputs (repeatable)."),
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Create a schedule that submits FILE's job at each fire (the options override what a
    schedule FILE says)."""
    data = load_workflow(file)
    spec: dict[str, Any] = data if "job" in data else {"job": data}
    given = {"name": name, "expression": expression, "timezone": timezone}
    spec.update({k: v for k, v in given.items() if v is not None})
    if skip_overlap:
        spec["overlap"] = "skip"
    if alert_after is not None:
        spec["alert"] = {"after_failures": alert_after}
    for pair in input_values or []:
        key, value = parse_input(pair)
        spec["job"].setdefault("inputs", {})[key] = value
    missing = [f"--{k}" for k in ("name", "expression") if not spec.get(k)]
    if missing:
        raise CliError(f"{file} is a job, not a schedule: give {' and '.join(missing)}")
    with api_client(api_url, api_key) as client:
        made = client.create_schedule(spec)
    console.print(f"schedule [bold]{made.schedule_id}[/]; next fires:")
    for when in made.next_fire_times:
        console.print(f"  {when}")


@schedules_app.command("list")
def list_schedules(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """The tenant's schedules and when each fires next."""
    with api_client(api_url, api_key) as client:
        found = client.schedules()
    table = Table("schedule", "name", "expression", "enabled", "health", "next fire")
    for item in found:
        nxt = item.next_fire_times[0] if item.next_fire_times else ""
        health = item.health + (
            f" ({item.consecutive_failures} failed)" if item.consecutive_failures else ""
        )
        table.add_row(item.schedule_id, item.name, item.expression, str(item.enabled), health, nxt)
    console.print(table)


def _set_enabled(schedule_id: str, enabled: bool, api_url: str | None, api_key: str | None) -> None:
    with api_client(api_url, api_key) as client:
        changed = client.update_schedule(schedule_id, enabled=enabled)
    console.print(f"{changed.schedule_id} {'resumed' if changed.enabled else 'paused'}")


@schedules_app.command("pause")
def pause(schedule_id: str, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Stop firing (the schedule is kept)."""
    _set_enabled(schedule_id, False, api_url, api_key)


@schedules_app.command("resume")
def resume(schedule_id: str, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Fire again from the next time the expression gives."""
    _set_enabled(schedule_id, True, api_url, api_key)


@schedules_app.command("delete")
def delete(schedule_id: str, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Delete a schedule (the jobs it made stay)."""
    with api_client(api_url, api_key) as client:
        client.delete_schedule(schedule_id)
    console.print(f"{schedule_id} deleted")


@schedules_app.command("runs")
def runs(schedule_id: str, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """The jobs a schedule made, newest first."""
    with api_client(api_url, api_key) as client:
        found = client.schedule_runs(schedule_id)
    table = Table("scheduled for", "job", "status", "changes")
    for job in found.jobs:
        table.add_row(job.scheduled_time or "", job.job_id, job.status.value, _badge(job))
    for skipped in found.skipped:
        table.add_row(skipped.scheduled_time, "", f"skipped: {skipped.skipped}")
    console.print(table)


@schedules_app.command("run")
def run_now(
    schedule_id: str,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the run to end and show what changed.")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait.")] = 300,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Start one run of the schedule now (for trying a monitor without waiting)."""
    from pagefleet.cli.monitors import render

    with api_client(api_url, api_key) as client:
        started = client.run_schedule(schedule_id)
        console.print(f"run [bold]{started.job_id}[/] {started.status.value}")
        if not wait:
            return
        job = client.wait(started.job_id, timeout=timeout)
        console.print(f"{job.job_id} {job.status.value}")
        if job.error is not None:
            console.print(f"  {job.error.kind}: {job.error.message}")
        found = client.changes(job.job_id)
    if found is not None:
        render(found)
    if job.status.value != "succeeded":
        raise typer.Exit(EXIT_FAILED)


@schedules_app.command("baseline")
def baseline(
    schedule_id: str,
    job_id: Annotated[
        str | None, typer.Argument(help="A succeeded run to compare with; omit to unpin.")
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Pin the run a schedule's monitor compares with (no JOB_ID: its last good run)."""
    with api_client(api_url, api_key) as client:
        changed = client.pin_baseline(schedule_id, job_id)
    pinned = changed.baseline_job_id
    console.print(f"{schedule_id}: baseline {pinned or 'the last successful run'}")


def _badge(job: Any) -> str:
    if job.changes is None:
        return ""
    if job.changes.baseline_job_id is None:
        return "no baseline"
    s = job.changes.summary
    return f"+{s.added} -{s.removed} ~{s.changed}" if job.changes.changed else "no change"
