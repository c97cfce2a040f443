"""A chaos run in parts that add up (``bench/chaos.py --parts N --record FILE [--resume]``).

2,000 jobs in one run take longer than a working session on this machine, and a run cut
short proves nothing. So ``--parts 4`` runs the jobs as four parts of a quarter each, one
after the other, each on a fresh local stack with every fault and all the traffic, and
appends each part's figures to ``--record`` (one JSON line) as it ends. ``--resume`` starts
at the first part the file does not hold yet: a run stopped between parts goes on where it
stopped. The summary adds the parts up: every count is a sum, and the recovery percentiles
are taken over the raw samples of all parts, so they are those of one run of all the jobs.

``--summarize FILE`` prints the summary of a recorded run without running anything.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.chaos_report import p50_p99
from bench.chaos_sessions import SessionFindings, details, rows
from bench.chaos_traffic import Findings, failed
from bench.common import commit

console = Console()
SAMPLES = (
    "to_next",
    "to_lease_end",
    "after_lease",
    "to_taken_back",
    "taken_to_next",
    "to_final",
    "to_next_clear",
    "to_final_clear",
)


def add_part_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parts", type=int, default=1, help="run the jobs as N parts")
    parser.add_argument("--record", type=Path, help="append each part's figures here (JSONL)")
    parser.add_argument("--resume", action="store_true", help="skip the parts --record holds")
    parser.add_argument("--summarize", type=Path, help="only print the summary of a record")


def print_sessions(out: Console, found: SessionFindings) -> None:
    table = Table(title="interactive sessions in the run")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in rows(found):
        table.add_row(name, value)
    out.print(table)
    for line in details(found):
        out.print(line)


def part_record(
    *,
    jobs: int,
    lost: int,
    doubled: int,
    found: Findings,
    sessions: SessionFindings,
    samples: dict[str, list[float]],
    killed: int,
    load: tuple[str, str],
    elapsed: float,
) -> dict[str, Any]:
    """What a part adds to the run: counts, the raw recovery samples, when and how loaded."""
    return {
        "jobs": jobs,
        "lost": lost,
        "doubled": doubled,
        "checks_failed": failed(found),
        "scheduled_times": found.scheduled_times,
        "webhooks_delivered": found.webhooks_delivered,
        "webhooks_missing": len(found.webhooks_missing),
        "live_gaps": found.live_gaps,
        "sessions": sessions.sessions,
        "session_steps": sessions.steps,
        "steps_twice": len(sessions.twice),
        "steps_lost": len(sessions.lost),
        "leftovers": len(sessions.leftovers),
        "leftover_details": sessions.leftovers[:20],
        "killed_jobs": killed,
        "samples": {k: [round(v, 3) for v in samples.get(k, [])] for k in SAMPLES},
        "load": list(load),
        "elapsed_s": round(elapsed),
    }


def run_parts(
    args: argparse.Namespace,
    run_part: Callable[[argparse.Namespace, int], dict[str, Any]],
    *,
    before_verdict: Callable[[], None] = lambda: None,
) -> int:
    if args.summarize:
        return summarize(read(args.summarize), before_verdict)
    parts = max(1, args.parts)
    per_part = math.ceil(args.jobs / parts)
    done = read(args.record) if args.resume and args.record else []
    if done and done[-1].get("of") != parts:
        raise SystemExit(f"{args.record} holds a run of {done[-1].get('of')} parts, not {parts}")
    records = list(done)
    for part in range(len(done), parts):
        console.print(f"part {part + 1} of {parts}: {per_part} jobs")
        record = run_part(args, per_part)
        record.update(part=part + 1, of=parts, commit=commit(), ended=_now())
        records.append(record)
        if args.record:
            args.record.parent.mkdir(parents=True, exist_ok=True)
            with args.record.open("a") as out:
                out.write(json.dumps(record) + "\n")
    return summarize(records, before_verdict)


def read(path: Path | None) -> list[dict[str, Any]]:
    if path is None or not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(
    records: list[dict[str, Any]], before_verdict: Callable[[], None] = lambda: None
) -> int:
    """Print the run's totals over its parts and the verdict; the exit status."""
    if not records:
        console.print("no part recorded")
        return 1
    total = {k: sum(r[k] for r in records) for k in _SUMMED}
    samples = {k: [v for r in records for v in r["samples"].get(k, [])] for k in SAMPLES}
    table = Table(title=f"chaos run: {len(records)} part(s)")
    for column in ("part", "ended (UTC)", "commit", "load start / end", "jobs", "lost", "doubled"):
        table.add_column(column)
    for r in records:
        table.add_row(
            f"{r.get('part', 1)}/{r.get('of', 1)}",
            r.get("ended", "-"),
            r.get("commit", "-"),
            " / ".join(r["load"]),
            *(str(r[k]) for k in ("jobs", "lost", "doubled")),
        )
    console.print(table)
    print(
        f"recovery to next attempt p50 / p99 {p50_p99(samples['to_next'])} "
        f"(lease end -> taken back {p50_p99(samples['to_taken_back'])}, taken back -> "
        f"started {p50_p99(samples['taken_to_next'])}); to final state "
        f"{p50_p99(samples['to_final'])}; {total['killed_jobs']} killed workers' jobs",
        flush=True,
    )
    # A part recorded before the other faults were timed has no "clear" samples.
    timed = [r for r in records if "to_next_clear" in r["samples"]]
    if timed:
        print(
            f"held up by no other fault ({len(samples['to_next_clear'])} of the "
            f"killed jobs of {len(timed)} part(s)): to next attempt p50 / p99 "
            f"{p50_p99(samples['to_next_clear'])}; to final state "
            f"{p50_p99(samples['to_final_clear'])}",
            flush=True,
        )
    for r in records:
        for line in r.get("leftover_details", []):
            console.print(f"  part {r.get('part', 1)} leftover: {line}")
    before_verdict()
    print(final_line(total), flush=True)
    bad = any(total[k] for k in ("lost", "doubled", "steps_twice", "steps_lost", "leftovers"))
    return 1 if bad or any(r["checks_failed"] for r in records) else 0


_SUMMED = (
    "jobs",
    "lost",
    "doubled",
    "scheduled_times",
    "webhooks_delivered",
    "webhooks_missing",
    "live_gaps",
    "sessions",
    "session_steps",
    "steps_twice",
    "steps_lost",
    "leftovers",
    "killed_jobs",
)


def final_line(total: dict[str, int]) -> str:
    return (
        f"chaos: {total['jobs']} jobs, {total['lost']} lost, {total['doubled']} doubled; "
        f"schedules {total['scheduled_times']} fired once each; webhooks "
        f"{total['webhooks_delivered']} delivered, {total['webhooks_missing']} missing; live "
        f"gaps {total['live_gaps']}; sessions {total['sessions']} with "
        f"{total['session_steps']} steps: {total['steps_twice']} run twice, "
        f"{total['steps_lost']} lost, {total['leftovers']} leftovers"
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
