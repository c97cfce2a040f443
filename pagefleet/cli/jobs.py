"""Job commands: talk to the API as any client does (``--api-url`` / ``--api-key``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from pagefleet.cli import render
from pagefleet.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ApiKey,
    ApiUrl,
    AsJson,
    CliError,
    api_client,
    console,
    fail,
    pydantic_details,
    validation_lines,
)
from pagefleet.cli.follow import follow_job
from pagefleet.jobs.submission import JobSubmission, submission_schema


def parse_input(pair: str) -> tuple[str, Any]:
    name, sep, raw = pair.partition("=")
    if not sep or not name:
        raise CliError(f"--input expects NAME=VALUE, got {pair!r}")
    try:
        value = json.loads(raw)
        if not isinstance(value, str | int | float | bool):
            value = raw
    except ValueError:
        value = raw
    return name.strip(), value


def load_workflow(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise CliError(f"{path}: no such file")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # optional: PyYAML is not a dependency
        except ImportError as exc:
            raise CliError("YAML workflows need PyYAML; use JSON or install pyyaml") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CliError(f"{path} is not valid YAML: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc
    if not isinstance(data, dict):
        raise CliError(f"{path}: a workflow is a JSON object with 'steps'")
    return data


def submit(
    file: Annotated[Path, typer.Argument(help="Workflow file (JSON, or YAML with PyYAML).")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job is final.")] = False,
    follow: Annotated[
        bool, typer.Option("--follow", help="Show its progress live until it ends.")
    ] = False,
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="NAME=VALUE, repeatable.")
    ] = None,
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key")] = None,
    priority: Annotated[str | None, typer.Option("--priority", help="high, normal or low.")] = None,
    delay: Annotated[
        int | None, typer.Option("--delay", min=0, help="Start no sooner than N seconds.")
    ] = None,
    after: Annotated[
        list[str] | None,
        typer.Option("--after", help="A job id this one waits for (repeatable: depends_on)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait.")] = 300,
    local_check: Annotated[
        bool, typer.Option("--local-check/--no-local-check", help="Validate before sending.")
    ] = True,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Submit a workflow file (inline steps, or {"workflow": "name@2", "inputs": ...}) as a job."""
    workflow = _submission(
        file,
        {"priority": priority, "delay_seconds": delay},
        after or [],
        inputs or [],
        local_check=local_check,
    )
    with api_client(api_url, api_key) as client:
        job = client.submit(workflow, idempotency_key=idempotency_key)
        if follow:
            if not as_json:
                console.print(f"submitted [bold]{job.job_id}[/], following…")
            code = follow_job(client, job.job_id, timeout=timeout, as_json=as_json)
            raise typer.Exit(code)
        if not wait:
            if as_json:
                console.print_json(job.model_dump_json())
            else:
                console.print(f"submitted [bold]{job.job_id}[/] ({render.status(job)})")
            return
        if not as_json:
            console.print(f"submitted [bold]{job.job_id}[/], waiting…")
        job = client.wait(job.job_id, timeout=timeout)
        if as_json:
            console.print_json(job.model_dump_json())
        else:
            render.print_job(job)
            if job.artifacts:
                render.print_artifacts(client.artifacts(job.job_id))
    if job.status.value != "succeeded":
        raise typer.Exit(EXIT_FAILED)


def _submission(
    file: Path,
    fields: dict[str, Any],
    after: list[str],
    inputs: list[str],
    *,
    local_check: bool,
) -> dict[str, Any]:
    """The workflow file with the command line's fields, parents and inputs applied."""
    workflow = load_workflow(file)
    workflow.update({key: value for key, value in fields.items() if value is not None})
    if after:
        workflow["depends_on"] = [*workflow.get("depends_on", []), *after]
    for pair in inputs:
        name, value = parse_input(pair)
        workflow.setdefault("inputs", {})
        if isinstance(workflow["inputs"], dict):
            workflow["inputs"][name] = value
    if local_check:
        try:
            JobSubmission.model_validate(workflow)
        except ValidationError as exc:
            lines = validation_lines(pydantic_details(exc))
            fail(f"{file} is not a valid workflow:\n" + "\n".join(lines), EXIT_USAGE)
    return workflow


def status(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Show one job."""
    with api_client(api_url, api_key) as client:
        job = client.get(job_id)
    if as_json:
        console.print_json(job.model_dump_json())
    else:
        render.print_job(job)


def cancel(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Cancel a job: a queued one at once, a running one within seconds."""
    with api_client(api_url, api_key) as client:
        job = client.cancel(job_id)
    if as_json:
        console.print_json(job.model_dump_json())
    elif job.status.value == "cancelled":
        console.print(f"[bold]{job.job_id}[/] cancelled")
    else:
        console.print(f"[bold]{job.job_id}[/] is {render.status(job)}; its worker is stopping it")


def resolve(
    job_id: Annotated[str, typer.Argument(help="Job id (in needs_review).")],
    done: Annotated[
        bool | None,
        typer.Option(
            "--done/--not-done",
            help="Whether its irreversible step took effect: done ends it succeeded; "
            "not done runs it again from the start.",
            show_default=False,
        ),
    ] = None,
    go_on: Annotated[
        bool,
        typer.Option(
            "--continue",
            help="With --done: run the steps after the irreversible one in a new attempt.",
        ),
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Resolve a job in needs_review: did its irreversible step take effect?"""
    if done is None:
        fail("say whether the step took effect: --done or --not-done", EXIT_USAGE)
    if go_on and not done:
        fail("--continue goes with --done (--not-done runs the job again)", EXIT_USAGE)
    with api_client(api_url, api_key) as client:
        job = client.resolve(job_id, "done" if done else "not_done", continue_=go_on)
    if as_json:
        console.print_json(job.model_dump_json())
    else:
        render.print_job(job)


def continue_(
    job_id: Annotated[str, typer.Argument(help="Job id (waiting_for_human).")],
    note: Annotated[
        str | None, typer.Option("--note", help="What you did, kept with the job.")
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Continue a job waiting for a person (its await_human step): it goes on in the same
    browser at its next step."""
    with api_client(api_url, api_key) as client:
        job = client.continue_job(job_id, note=note)
    if as_json:
        console.print_json(job.model_dump_json())
    else:
        render.print_job(job)


def hand_back(
    job_id: Annotated[str, typer.Argument(help="Job or browser session id (taken over).")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Hand a taken-over page back (the console's "Hand back"): the job's steps go on. Any
    key of the owning tenant may; a page no one holds any more is said so."""
    with api_client(api_url, api_key) as client:
        answer = client.hand_back(job_id)
    if as_json:
        console.print_json(answer.model_dump_json())
    elif answer.handed_back and answer.takeover is not None:
        console.print(f"Handed back: {answer.takeover.holder} no longer holds job {job_id}.")
    else:
        console.print(f"No one held job {job_id}'s page any more.")


def replay(
    job_id: Annotated[str, typer.Argument(help="Job id (ended, with a har.zip).")],
    offline: Annotated[
        bool, typer.Option("--offline/--online", help="Answered from its HAR only (required).")
    ] = True,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Replay an ended job offline: the same steps and inputs, every request answered from
    its recorded traffic (submit jobs with options.har to keep one). Prints the new job."""
    if not offline:
        fail("only offline replays exist (--offline)", EXIT_USAGE)
    with api_client(api_url, api_key) as client:
        job = client.replay(job_id)
    if as_json:
        console.print_json(job.model_dump_json())
    else:
        render.print_job(job)


def jobs(
    status: Annotated[str | None, typer.Option("--status", help="Only jobs in this state.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Only jobs of this name.")] = None,
    workflow: Annotated[
        str | None, typer.Option("--workflow", help="Only jobs of this named workflow.")
    ] = None,
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Only jobs this schedule (id) made.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 20,
    cursor: Annotated[str | None, typer.Option("--cursor")] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """List jobs, newest first; filters combine (a filtered page may be short: --cursor goes
    on)."""
    with api_client(api_url, api_key) as client:
        page = client.list(
            status=status,
            limit=limit,
            cursor=cursor,
            name=name,
            workflow=workflow,
            schedule_id=schedule,
        )
    if as_json:
        console.print_json(page.model_dump_json())
        return
    table = Table("job", "status", "name", "created", "finished")
    table.columns[0].no_wrap = True
    for job in page.jobs:
        table.add_row(
            job.job_id,
            render.status(job),
            job.name or "",
            job.created_at or "",
            job.finished_at or "",
        )
    console.print(table)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")


def artifacts(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """List a job's artifacts with short-lived download links."""
    with api_client(api_url, api_key) as client:
        links = client.artifacts(job_id)
    if as_json:
        console.print_json(json.dumps([a.model_dump() for a in links]))
    else:
        render.print_artifacts(links)


def schema() -> None:
    """Print the JSON Schema of a job request (for editors)."""
    sys.stdout.write(json.dumps(submission_schema(), indent=2) + "\n")


def mcp(
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Serve the Model Context Protocol on stdin/stdout (for AI agents): browser sessions,
    steps with observations, save as workflow, jobs."""
    import anyio  # on first call: the other commands never need it

    from pagefleet.cli.mcp_server import serve_stdio

    anyio.run(serve_stdio, api_client(api_url, api_key))
