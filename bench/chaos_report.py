"""What a chaos run saw (``Run``) and its report (``bench/chaos.py``): the final states,
the jobs that ended otherwise than their kind should and why, and the recovery of a killed
worker's jobs."""

from __future__ import annotations

import statistics
import threading
from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from bench.common import load_average as load
from devstack.chaos import Audit, ChaosSite
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

console = Console()
EXPECTED = {
    "page": JobStatus.SUCCEEDED,
    "flaky": JobStatus.SUCCEEDED,
    "hang": JobStatus.TIMED_OUT,
    "cancel": JobStatus.CANCELLED,
}


@dataclass(frozen=True)
class Kill:
    """A running job of a killed worker, as its record was at the kill."""

    at: float  # wall clock (epoch s) of the kill
    attempt: int
    lease_end: float | None  # the record's lease_expires_at (epoch s)


@dataclass
class Run:
    kinds: dict[str, str] = field(default_factory=dict)  # job id -> kind
    submit_errors: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    chromium_kills: int = 0
    worker_exits: int = 0  # workers that exited on their own (and were replaced)
    killed: dict[str, Kill] = field(default_factory=dict)  # job id -> its worker's kill
    browser_killed: set[str] = field(default_factory=set)  # jobs running when Chromium was
    # Each Chromium kill: the worker's id (``local-worker-3``) and when (epoch s).
    chromium_killed_at: list[tuple[str, float]] = field(default_factory=list)
    taken_back: dict[str, float] = field(default_factory=dict)  # job id -> epoch s
    next_attempt: dict[str, float] = field(default_factory=dict)  # job id -> epoch s
    settled_at: dict[str, float] = field(default_factory=dict)  # job id -> epoch s
    poison_sent: int = 0
    # The embedded AWS's freezes (epoch s): nothing is taken back or started during one.
    frozen: list[tuple[float, float]] = field(default_factory=list)
    # job id -> when it was put back for its site's open circuit breaker (epoch s).
    breaker_deferred: dict[str, list[float]] = field(default_factory=dict)
    accounted: set[int] = field(default_factory=set)  # worker processes killed or replaced
    lock: threading.Lock = field(default_factory=threading.Lock)


# --- the report -------------------------------------------------------------------------------
def pct(values: list[float], q: int) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f} s"
    return f"{statistics.quantiles(values, n=100, method='inclusive')[q - 1]:.1f} s"


def p50_p99(values: list[float]) -> str:
    return f"{pct(values, 50)} / {pct(values, 99)}"


def unexpected(run: Run, report: Audit) -> list[tuple[str, JobRecord]]:
    """Jobs that ended otherwise than their kind should (a cancel may finish first)."""
    out = []
    for job_id, record in report.records.items():
        kind = run.kinds[job_id]
        if record.status is EXPECTED[kind]:
            continue
        if kind == "cancel" and record.status is JobStatus.SUCCEEDED:
            continue
        out.append((job_id, record))
    return out


def by_the_faults(run: Run, job_id: str, record: JobRecord) -> bool:
    """Ended so because the bench killed its worker or its Chromium on its last allowed
    attempt (or its workers too often): the right ending for what happened to it."""
    kind = record.error.kind if record.error else None
    return (kind in ("lease_expired", "dead_lettered") and job_id in run.killed) or (
        kind == "browser_crashed"
        and (job_id in run.browser_killed or chromium_killed_during(run, record))
    )


# A job's context opens while its claim is written (``run/early.py``): a Chromium kill this
# long before its attempt's recorded start may still be what ended it.
KILL_BEFORE_START_S = 2.0


def chromium_killed_during(run: Run, record: JobRecord) -> bool:
    """Whether the bench killed the Chromium of the worker running the job's last attempt while
    it ran. The list of jobs a worker held is read after its kill, and misses a job whose
    claim was still being written then; the attempt's own worker and times do not."""
    if not record.attempts:
        return False
    last = record.attempts[-1]
    start = epoch_of_iso(last.started_at) - KILL_BEFORE_START_S
    end = epoch_of_iso(last.finished_at) if last.finished_at else float("inf")
    return any(
        last.worker.split("/")[0] == worker and start <= at <= end
        for worker, at in run.chromium_killed_at
    )


def why(run: Run, job_id: str, record: JobRecord) -> str:
    error = record.error
    text = f"{error.kind}: {error.message}"[:110] if error else "no error"
    hits = [
        what
        for what, hit in (("worker", run.killed), ("Chromium", run.browser_killed))
        if job_id in hit
    ]
    killed = f" [its {' and '.join(hits)} killed by the bench]" if hits else ""
    return f"attempt {record.attempt}/{record.request.max_attempts}, {text}{killed}"


def tally(run: Run, jobs: list[tuple[str, JobRecord]]) -> str:
    counts = Counter(f"{run.kinds[j]}->{r.status.value}" for j, r in jobs)
    return ", ".join(f"{k}: {v}" for k, v in counts.items()) or "0"


def recovery_samples(run: Run) -> dict[str, list[float]]:
    """Seconds from each killed worker's kill to its jobs' next attempt, cut where the time
    goes (the lease running out; a lease watch or the sweeper seeing it; the job waiting for a
    slot and starting), and to their final state: kept raw, so that parts of a run add up to
    one distribution."""
    kills = {j: k for j, k in run.killed.items() if j in run.next_attempt}
    ended = {j: k for j, k in kills.items() if k.lease_end}
    back = {j: k for j, k in ended.items() if j in run.taken_back}
    clear = {j: k for j, k in kills.items() if not held_up(run, j, k.at, run.next_attempt[j])}
    settled = {j: run.killed[j] for j in run.settled_at if j in run.killed}
    return {
        "to_next": [run.next_attempt[j] - k.at for j, k in kills.items()],
        # The same, of the recoveries no other fault held up: a freeze of the embedded AWS
        # stops every take-back and start, and a job whose site's breaker is open waits for
        # the site (the run's outage), whatever became of its worker.
        "to_next_clear": [run.next_attempt[j] - k.at for j, k in clear.items()],
        "to_lease_end": [k.lease_end - k.at for k in ended.values() if k.lease_end],
        "after_lease": [run.next_attempt[j] - k.lease_end for j, k in ended.items() if k.lease_end],
        "to_taken_back": [run.taken_back[j] - k.lease_end for j, k in back.items() if k.lease_end],
        "taken_to_next": [run.next_attempt[j] - run.taken_back[j] for j in back],
        "to_final": [run.settled_at[j] - run.killed[j].at for j in run.settled_at],
        "to_final_clear": [
            run.settled_at[j] - k.at
            for j, k in settled.items()
            if not held_up(run, j, k.at, run.settled_at[j])
        ],
    }


def froze(run: Run, start: float, end: float) -> bool:
    """Whether a freeze of the embedded AWS overlapped ``start``..``end`` (epoch s)."""
    return any(began < end and start < ended for began, ended in run.frozen)


def deferred(run: Run, job_id: str, start: float, end: float) -> bool:
    """Whether the job was put back for an open breaker between ``start`` and ``end``."""
    return any(start <= at <= end for at in run.breaker_deferred.get(job_id, []))


def held_up(run: Run, job_id: str, start: float, end: float) -> bool:
    return froze(run, start, end) or deferred(run, job_id, start, end)


def recovery_rows(killed: int, samples: dict[str, list[float]]) -> list[tuple[str, str]]:
    clear = samples.get("to_next_clear", [])
    return [
        ("killed workers' jobs", str(killed)),
        ("recovery to next attempt p50 / p99", p50_p99(samples["to_next"])),
        ("  kill -> lease end p50 / p99", p50_p99(samples["to_lease_end"])),
        ("  lease end -> next attempt p50 / p99", p50_p99(samples["after_lease"])),
        ("    lease end -> taken back p50 / p99", p50_p99(samples.get("to_taken_back", []))),
        ("    taken back -> started p50 / p99", p50_p99(samples.get("taken_to_next", []))),
        ("recovery to final state p50 / p99", p50_p99(samples["to_final"])),
        (
            f"  held up by no other fault ({len(clear)} jobs): to next attempt / final p99",
            f"{pct(clear, 99)} / {pct(samples.get('to_final_clear', []), 99)}",
        ),
    ]


def print_report(
    run: Run, report: Audit, elapsed: float, site: ChaosSite, faults: tuple[int, int], dlq: int
) -> None:
    ended = unexpected(run, report)
    faults_ended = [(j, r) for j, r in ended if by_the_faults(run, j, r)]
    odd = [(j, r) for j, r in ended if not by_the_faults(run, j, r)]
    counts = Counter(run.kinds.values())
    table = Table(title=f"chaos run: {len(run.kinds)} jobs in {elapsed:.0f} s")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = [
        ("submitted", str(len(run.kinds))),
        (
            "  of which page / flaky(503) / hang / cancel",
            " / ".join(str(counts[k]) for k in ("page", "flaky", "hang", "cancel")),
        ),
        ("succeeded", str(report.count(JobStatus.SUCCEEDED))),
        (
            "failed / timed_out",
            f"{report.count(JobStatus.FAILED)} / {report.count(JobStatus.TIMED_OUT)}",
        ),
    ]
    rows += [(f"  {reason}", str(n)) for reason, n in sorted(report.failed_by_reason.items())]
    rows += [
        ("cancelled", str(report.count(JobStatus.CANCELLED))),
        ("expired", str(report.count(JobStatus.EXPIRED))),
        ("dead-lettered jobs", str(report.count(JobStatus.DEAD_LETTERED))),
        ("poison messages sent / DLQ messages consumed", f"{run.poison_sent} / {dlq}"),
        ("ended by a kill on their last attempt", tally(run, faults_ended)),
        ("unexpected final states", tally(run, odd)),
        ("LOST (must be 0)", str(len(report.lost))),
        ("DOUBLED: >1 final result (must be 0)", str(len(report.doubled))),
        ("final entry not the last attempt's", str(len(report.inconsistent))),
        ("workers killed / Chromium killed", f"{run.kills} / {run.chromium_kills}"),
        ("workers that exited on their own (replaced)", str(run.worker_exits)),
        *recovery_rows(len(run.killed), recovery_samples(run)),
        ("503 answers served", str(site.served_503)),
        ("AWS faults injected: API function / workers (logged)", f"{faults[0]} / {faults[1]}"),
        (
            "submit retries (HTTP status)",
            ", ".join(f"{k}: {v}" for k, v in run.submit_errors.items()) or "0",
        ),
        ("load average (1, 5, 15 min) at the end", load()),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    for job_id, record in ended:
        kind, status = run.kinds[job_id], record.status.value
        console.print(f"  {kind} {job_id} -> {status}: {why(run, job_id, record)}")
    slow = {j: run.next_attempt[j] - k.at for j, k in run.killed.items() if j in run.next_attempt}
    for job_id, took in sorted(slow.items(), key=lambda kv: -kv[1])[:5]:
        if took > 30:  # the worker and sweeper logs tell where the time went
            kill, then = run.killed[job_id], run.next_attempt[job_id]
            causes = [
                what
                for what, hit in (
                    ("the embedded AWS was frozen", froze(run, kill.at, then)),
                    ("its site's breaker was open", deferred(run, job_id, kill.at, then)),
                )
                if hit
            ]
            because = f" ({'; '.join(causes)} during it)" if causes else ""
            console.print(
                f"  slow recovery: {job_id} {took:.0f} s after its worker's kill{because}"
            )
    if report.lost:
        console.print(
            "lost:",
            {j: report.records.get(j) and report.records[j].status.value for j in report.lost[:20]},
        )
    if report.doubled:
        console.print("doubled:", report.doubled[:20])
