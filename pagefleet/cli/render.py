"""How the CLI shows jobs, artifacts, the local stack and example runs."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from pagefleet.cli.common import console
from pagefleet.client import Job

_STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "dead_lettered": "red",
    "cancelled": "yellow",
    "expired": "yellow",
    "running": "cyan",
    "queued": "blue",
    "retry_scheduled": "magenta",
    "needs_review": "bold magenta",
    "waiting_for_human": "bold yellow",
}
_CHECKPOINT_STYLE = {"done": "green", "not_done": "yellow", "unknown": "magenta"}


def status(job: Job) -> str:
    value = job.status.value
    return f"[{_STATUS_STYLE.get(value, 'white')}]{value}[/]"


def print_job(job: Job) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row("job", job.job_id)
    table.add_row("status", status(job))
    if job.name:
        table.add_row("name", job.name)
    table.add_row("attempt", str(job.attempt))
    for label in ("created_at", "started_at", "finished_at"):
        value = getattr(job, label)
        if value:
            table.add_row(label.replace("_at", ""), value)
    if job.error:
        where = f"step {job.error.step_index}" if job.error.step_index is not None else ""
        if job.error.step:
            where += f" {job.error.step}"
        table.add_row("error", f"[red]{job.error.kind}[/] {where}: {job.error.message}".strip())
    for checkpoint in job.checkpoints:
        style = _CHECKPOINT_STYLE.get(checkpoint.state, "cyan")
        table.add_row(
            f"step {checkpoint.step}",
            f"{checkpoint.label}: [{style}]{checkpoint.state}[/] ({checkpoint.how}, attempt "
            f"{checkpoint.attempt}, {checkpoint.at})",
        )
    if job.compensation is not None:
        failed = f": {job.compensation.error}" if job.compensation.error else ""
        table.add_row("compensation", f"{job.compensation.state}{failed}")
    if job.status.value == "needs_review":
        table.add_row("resolve", f"pagefleet resolve {job.job_id} --done | --not-done")
    if job.status.value == "waiting_for_human" and job.human is not None:
        table.add_row("asks", f"{job.human.prompt} (until {job.human.timeout_at}, epoch s)")
        table.add_row("continue", f"pagefleet continue {job.job_id}")
    _replay_rows(table, job)
    if job.artifacts:
        table.add_row("artifacts", ", ".join(f"{a.name} ({a.size} B)" for a in job.artifacts))
    console.print(table)
    if job.result:
        console.print_json(json.dumps(job.result))


def _replay_rows(table: Table, job: Job) -> None:
    """How the job and its offline replays link, and how to replay a failure."""
    if job.replay_of:
        table.add_row("replays", f"{job.replay_of} (offline, from its har.zip)")
    if job.replays:
        table.add_row("replayed by", ", ".join(job.replays))
    has_har = any(a.name == "har.zip" for a in job.artifacts)
    if job.status.value == "failed" and has_har and not job.replay_of:
        table.add_row("replay", f"pagefleet replay {job.job_id}")


def print_artifacts(links: list[Any]) -> None:
    # One block per artifact: URLs and digests are printed whole so they can be copied.
    for a in links:
        console.print(f"[bold]{a.name}[/]  {a.size} B  {a.content_type}", highlight=False)
        console.print(f"  sha256 {a.sha256}", highlight=False)
        console.print(f"  {a.url}", highlight=False, markup=False)


def print_stack(stack: Any) -> None:
    info = stack.info()
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("API", info.api_url)
    table.add_row("console", info.console_url)
    live = getattr(stack, "live", None)  # the WebSocket API, where the stack serves one
    if live is not None:
        table.add_row("live (WebSocket)", live.url)
    table.add_row("dev tenant key", info.dev_api_key)
    table.add_row("demo site", info.site_url)
    table.add_row("embedded AWS", info.aws_endpoint)
    table.add_row("workers", f"{stack.workers} x concurrency {stack.concurrency}")
    iam = getattr(stack, "iam", None)
    if iam is not None:
        checked = "every AWS call checked against the synthesized template's policies"
        table.add_row("IAM", checked if iam.on else "not checked (PAGEFLEET_LOCAL_IAM=0)")
    table.add_row("logs", str(info.log_dir))
    console.print(table)
    console.print("\nUse the CLI against it:")
    for name, value in info.env.items():
        console.print(f"  export {name}={value}", highlight=False, soft_wrap=True)
    console.print()


def print_examples(results: list[Any]) -> bool:
    """A table of example runs and their details; True if every example succeeded."""
    table = Table("example", "job", "status", "artifacts (sha256 checked)")
    table.columns[1].no_wrap = True
    for r in results:
        status_text = status(r.job) if r.job else "[red]not submitted[/]"
        checks = ", ".join(
            f"{a.artifact.name} {'[green]ok[/]' if a.ok else '[red]BAD[/]'}" for a in r.artifacts
        )
        table.add_row(r.name, r.job.job_id if r.job else "", status_text, checks)
    console.print(table)
    for r in results:
        console.print(f"[bold]{r.name}[/]")
        if r.problem:
            console.print(f"  [red]problem:[/] {r.problem}", highlight=False)
        if r.job and r.job.result:
            result = json.dumps(r.job.result, ensure_ascii=False)
            console.print(f"  result: {result}", highlight=False, markup=False)
        for a in r.artifacts:
            console.print(f"  {a.artifact.name}: {a.artifact.url}", highlight=False, markup=False)
            if a.problem:
                console.print(f"    [red]{a.problem}[/]", highlight=False)
    ok = all(r.ok for r in results) and bool(results)
    verdict = "[green]all examples succeeded[/]" if ok else "[red]some examples did not succeed[/]"
    console.print(verdict)
    return ok
