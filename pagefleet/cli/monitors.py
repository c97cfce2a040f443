"""``pagefleet changes JOB_ID``: what a monitor's run changed, as tables."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from pagefleet.cli.common import ApiKey, ApiUrl, AsJson, CliError, api_client, console
from pagefleet.monitors.changes import Changes, TrackedChange


def changes(
    job_id: Annotated[str, typer.Argument(help="A monitor's run (a job with monitor).")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """What a monitor's run changed against its baseline: records added, removed and
    changed (before -> after), values, and the screenshot's changed-pixel ratio."""
    with api_client(api_url, api_key) as client:
        found = client.changes(job_id)
    if found is None:
        raise CliError(f"job {job_id} has no changes (not a monitor's run, or not ended)")
    if as_json:
        console.print_json(found.model_dump_json())
        return
    render(found)


def render(found: Changes) -> None:
    if found.baseline_job_id is None:
        console.print(found.note or "no baseline")
        return
    s = found.summary
    head = "changed" if found.changed else "no change"
    console.print(
        f"[bold]{head}[/] against {found.baseline_job_id}: {s.added} added, {s.removed} "
        f"removed, {s.changed} changed"
    )
    table = Table("tracked", "change", "key", "field", "before", "after")
    for name, tracked in found.records.items():
        for row in rows(tracked):
            table.add_row(name, *row)
    if found.records:
        console.print(table)
    if found.visual is not None:
        visual = found.visual
        over = "over" if visual.changed else "within"
        line = f"screenshot: {visual.ratio:.2%} of pixels changed ({over} {visual.threshold:.2%})"
        console.print(line + (f"; see {visual.diff_artifact}" if visual.diff_artifact else ""))
        if visual.note:
            console.print(f"  {visual.note}")


def rows(tracked: TrackedChange) -> list[tuple[str, str, str, str, str]]:
    if tracked.kind == "value":
        return [("changed", "", "", _text(tracked.before), _text(tracked.after))]
    out = [("added", "", "", "", _text(record)) for record in tracked.added]
    out += [("removed", "", "", _text(record), "") for record in tracked.removed]
    for record in tracked.changed:
        for name, field in record.fields.items():
            out.append(
                ("changed", _text(record.key), name, _text(field.before), _text(field.after))
            )
    if tracked.truncated:
        out.append(("…", "", "", "more in changes.json", ""))
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
