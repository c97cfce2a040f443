"""End-to-end throughput: the whole local stack vs a bare Playwright loop, in one run.

    .venv/bin/python bench/e2e_throughput.py [--jobs 100] [--concurrency 2]

Every side does the same work per job (bench/common.py): open a demo-site page, wait for
the list, extract the product names and links, take a full-page screenshot (and hash it).
The bare loop is one Chromium launched exactly as the worker launches it, a fresh context
per job, C asyncio tasks. The platform run submits every job through the HTTP API first and
is timed from the first submission until every job is final (API, queue, worker, DynamoDB
and S3 included). The third side is the platform with ``options.isolation: "tenant"``
(warm contexts, browser_task/browser/warm.py). All are measured after a warm-up, in segments whose
order rotates (B P W, P W B, W B P, ...; the stack stays up and idle while the bare loop
runs), so that machine load drifting during the run (these machines are shared) weighs on
every side alike. Targets at concurrency 2: platform / bare >= 0.95, warm / bare >= 1.2.

``--fakes --aws-latency-ms N`` measures the worker alone instead (bench/fakes_worker.py): the
worker on the ports' in-memory fakes, each request answered N ms late as AWS would answer
it, against the same bare loop, segments alternating; no embedded AWS and no function
stand-ins on the cores: each segment's jobs are submitted (the API's work) before the
worker may see them, and timed from then. Target at 10 ms: worker / bare >= 0.95.

This prints figures; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from rich.console import Console
from rich.table import Table

from bench.common import Measured, bare_loop, lift_submission_rate, ran_every_job, workflow
from devstack.call_counter import COUNT_ENV, COUNTS_PATH
from devstack.stack import LocalStack
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import FINAL_STATES, JobStatus

TARGET_RATIO = 0.95
TARGET_WARM_RATIO = 1.2
console = Console()


@dataclass
class Run:
    mode: str
    jobs: int
    seconds: float
    succeeded: int
    note: str = ""
    submit_s: float = 0.0  # platform: time spent submitting through the API

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


# --- baseline: a bare Playwright loop -------------------------------------------------------
async def _bare(site: str, jobs: int, warmup: int, concurrency: int) -> Run:
    """One Chromium launched exactly as the worker launches it, a fresh context per job."""
    ok, elapsed = await bare_loop(site, jobs, concurrency, launch="worker", warmup=warmup)
    return Run("bare loop", jobs, elapsed, ok)


# --- the platform ------------------------------------------------------------------------------
def wait_final(
    stack: LocalStack, job_ids: list[str], timeout_s: float
) -> tuple[dict[JobStatus, int], float | None]:
    """Final status of every job, and the epoch time the last one finished (the finish
    time comes from the records: ``finished_at``, written by the worker)."""
    counts: dict[JobStatus, int] = {}
    last_finish: float | None = None
    for record in final_records(stack, job_ids, timeout_s):
        counts[record.status] = counts.get(record.status, 0) + 1
        if record.finished_at is not None:
            finished = datetime.fromisoformat(record.finished_at.replace("Z", "+00:00"))
            last_finish = max(last_finish or 0.0, finished.timestamp())
    return counts, last_finish


def final_records(stack: LocalStack, job_ids: list[str], timeout_s: float) -> list[JobRecord]:
    """Each job's record once it is final (or as it is at the deadline).

    Jobs are read by key, in submission order, every two seconds, so the polling can be
    slow and cost the system being measured next to nothing.
    """
    from devstack.stack import DEV_TENANT
    from pagefleet.runtime import RUNTIME

    assert stack.worker_settings is not None
    store = RUNTIME.job_services(stack.worker_settings).store
    deadline = time.monotonic() + timeout_s
    records = []
    for job_id in job_ids:
        while True:
            record = store.get(DEV_TENANT, job_id, consistent=False)
            if record.status in FINAL_STATES or time.monotonic() > deadline:
                break
            time.sleep(2.0)
        records.append(record)
    return records


class Platform:
    """The local stack, kept up between segments; each segment submits and waits."""

    def __init__(self, stack: LocalStack, timeout_s: float, *, warm: bool = False) -> None:
        self.stack = stack
        self.timeout_s = timeout_s
        self.body = workflow(stack.site_url)
        self.mode = "platform, warm" if warm else "platform"
        if warm:
            self.body["options"] = {"isolation": "tenant"}
        self.calls: dict[str, list[float]] = {}

    def segment(self, jobs: int) -> Run:
        before = aws_calls(self.stack)
        with self.stack.client() as api:
            start = time.time()
            job_ids = [api.submit(self.body).job_id for _ in range(jobs)]
            submitted = time.time() - start
            counts, last_finish = wait_final(self.stack, job_ids, self.timeout_s)
            elapsed = (last_finish or time.time()) - start
        done = sum(n for status, n in counts.items() if status in FINAL_STATES)
        note = f"TIMED OUT with {done}/{jobs} final" if done < jobs else ""
        run = Run(self.mode, jobs, elapsed, counts.get(JobStatus.SUCCEEDED, 0), note)
        run.submit_s = submitted
        if before is not None:
            after = aws_calls(self.stack) or {}
            for name, (count, cpu) in after.items():
                was = before.get(name, [0, 0.0])
                seen = self.calls.setdefault(name, [0, 0.0])
                seen[0] += count - was[0]
                seen[1] += cpu - was[1]
        return run


def aws_calls(stack: LocalStack) -> dict[str, list[float]] | None:
    """The embedded AWS's call counts so far (None unless it counts: ``--count-calls``)."""
    if not os.environ.get(COUNT_ENV):
        return None
    with httpx.Client(trust_env=False, timeout=10) as http:
        return dict(http.get(stack.aws_endpoint + COUNTS_PATH).json())


def print_calls(mode: str, calls: dict[str, list[float]], jobs: int) -> None:
    table = Table(f"{mode}: AWS call", "per job", "CPU ms per job")
    total = [0.0, 0.0]
    for name, (count, cpu) in sorted(calls.items(), key=lambda kv: -kv[1][0]):
        if count:
            table.add_row(name, f"{count / jobs:.2f}", f"{cpu * 1000 / jobs:.1f}")
            total = [total[0] + count, total[1] + cpu]
    table.add_row("total", f"{total[0] / jobs:.2f}", f"{total[1] * 1000 / jobs:.1f}")
    console.print(table)


def _sum(runs: list[Run], note: str) -> Run:
    return Run(
        runs[0].mode,
        sum(r.jobs for r in runs),
        sum(r.seconds for r in runs),
        sum(r.succeeded for r in runs),
        note,
    )


def print_runs(totals: dict[str, Run]) -> None:
    table = Table("mode", "jobs", "succeeded", "seconds", "jobs/s", "note")
    for run in totals.values():
        table.add_row(
            run.mode,
            str(run.jobs),
            str(run.succeeded),
            f"{run.seconds:.2f}",
            f"{run.rate:.2f}",
            run.note,
        )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="worker processes (platform)")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument(
        "--no-warm", action="store_true", help="skip the warm-context mode (isolation: tenant)"
    )
    parser.add_argument("--segments", type=int, default=6, help="rotations of the sides")
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="count the embedded AWS's calls (and their CPU) per platform job",
    )
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds for each platform segment"
    )
    parser.add_argument(
        "--fakes",
        action="store_true",
        help="the worker on the ports' in-memory fakes instead of the local stack",
    )
    parser.add_argument(
        "--aws-latency-ms",
        type=float,
        default=10.0,
        help="with --fakes: how late each request to a fake is answered",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    if args.fakes:
        return fakes_main(args)
    if args.count_calls:
        os.environ[COUNT_ENV] = "1"  # the embedded AWS inherits it

    console.print(
        f"{args.jobs} jobs, concurrency {args.concurrency}, warm-up {args.warmup}, "
        f"{os.cpu_count()} CPUs"
    )
    # Segments rotate the order of the sides (B P W, P W B, W B P, ...): a linear drift in
    # machine load weighs on every side alike.
    segments = max(1, min(args.segments, args.jobs))
    base, extra = divmod(args.jobs, segments)
    sizes = [base + (1 if i < extra else 0) for i in range(segments)]
    sides = ["bare", "platform"] + (["warm"] if not args.no_warm else [])
    runs: dict[str, list[Run]] = {side: [] for side in sides}
    with LocalStack(api_port=0, workers=args.workers, concurrency=args.concurrency) as stack:
        lift_submission_rate(stack)
        platforms = {
            "platform": Platform(stack, args.timeout),
            "warm": Platform(stack, args.timeout, warm=True),
        }
        with console.status("warming up…"):
            for side in sides[1:]:
                platforms[side].segment(args.warmup)
        for index, size in enumerate(sizes):
            order = sides[index % len(sides) :] + sides[: index % len(sides)]
            for side in order:
                with console.status(f"segment {index + 1}/{segments}: {side}…"):
                    if side == "bare":
                        runs[side].append(
                            asyncio.run(_bare(stack.site_url, size, args.warmup, args.concurrency))
                        )
                    else:
                        runs[side].append(platforms[side].segment(size))
        stack.cleanup_logs()
    for side in sides[1:]:
        if platforms[side].calls:
            jobs = sum(r.jobs for r in runs[side])
            print_calls(platforms[side].mode, platforms[side].calls, jobs)
    totals = {}
    for side, side_runs in runs.items():
        note = "segments " + " / ".join(f"{r.rate:.2f}" for r in side_runs)
        if side != "bare":
            note += f"; submitting {sum(r.submit_s for r in side_runs):.1f}s of it"
            note += "".join(f"; {r.note}" for r in side_runs if r.note)
        totals[side] = _sum(side_runs, note)
    bare = totals["bare"]

    print_runs(totals)
    complete = whole_sides(totals)
    for side, target in (("platform", TARGET_RATIO), ("warm", TARGET_WARM_RATIO)):
        if side not in totals or not {side, "bare"} <= complete:
            continue
        ratio = totals[side].rate / bare.rate if bare.rate else 0.0
        verdict = "meets" if ratio >= target else "below"
        name = "platform" if side == "platform" else "platform warm"
        console.print(f"ratio {name}/bare = {ratio:.2f} ({verdict} the {target} target)")
    return 0 if complete == set(totals) else 1


def whole_sides(totals: dict[str, Run]) -> set[str]:
    """The sides that ran every job: a rate is jobs asked over seconds, and a side whose
    jobs failed fast would give a ratio that reads as a result."""
    return {
        side for side, run in totals.items() if ran_every_job(run.mode, run.succeeded, run.jobs)
    }


def fakes_main(args: argparse.Namespace) -> int:
    """The worker on delayed fakes against the bare loop, segments alternating."""
    from bench.fakes_worker import FakesWorker
    from devstack.demo_site import DemoSite

    console.print(
        f"{args.jobs} jobs, concurrency {args.concurrency}, warm-up {args.warmup}, "
        f"{os.cpu_count()} CPUs; the worker on the fakes, {args.aws_latency_ms:g} ms a request"
    )
    segments = max(1, min(args.segments, args.jobs))
    base, extra = divmod(args.jobs, segments)
    sizes = [base + (1 if i < extra else 0) for i in range(segments)]
    runs: dict[str, list[Run]] = {"bare": [], "fakes": []}
    site = DemoSite().start()
    try:
        body = workflow(site.url)
        with FakesWorker(latency_ms=args.aws_latency_ms, concurrency=args.concurrency) as fakes:
            with console.status("warming up…"):
                fakes.run(body, args.warmup, args.timeout)
                calls_before = dict(fakes.counts)
            for index, size in enumerate(sizes):
                order = ["bare", "fakes"] if index % 2 == 0 else ["fakes", "bare"]
                for side in order:
                    with console.status(f"segment {index + 1}/{segments}: {side}…"):
                        if side == "bare":
                            runs[side].append(
                                asyncio.run(_bare(site.url, size, args.warmup, args.concurrency))
                            )
                        else:
                            ok, seconds = fakes.run(body, size, args.timeout)
                            runs[side].append(Run("worker on fakes", size, seconds, ok))
            calls = {
                name: (count - calls_before.get(name, 0)) / args.jobs
                for name, count in fakes.counts.items()
            }
    finally:
        site.stop()
    table = Table("request to a fake (per job, submissions included)", "per job")
    for name, per_job in sorted(calls.items(), key=lambda kv: -kv[1]):
        if per_job:
            table.add_row(name, f"{per_job:.2f}")
    table.add_row("total", f"{sum(calls.values()):.2f}")
    console.print(table)
    totals = {
        side: _sum(side_runs, "segments " + " / ".join(f"{r.rate:.2f}" for r in side_runs))
        for side, side_runs in runs.items()
    }
    print_runs(totals)
    if whole_sides(totals) != set(totals):
        return 1
    bare, worker = totals["bare"], totals["fakes"]
    ratios = [f.rate / b.rate for f, b in zip(runs["fakes"], runs["bare"], strict=True) if b.rate]
    ratio = worker.rate / bare.rate if bare.rate else 0.0
    verdict = "meets" if ratio >= TARGET_RATIO else "below"
    console.print(
        "worker / bare per segment: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + (f" (median {statistics.median(ratios):.2f})" if ratios else "")
    )
    print(
        f"throughput, worker on the fakes at {args.aws_latency_ms:g} ms a request: bare "
        f"{bare.rate:.2f} jobs/s, worker {worker.rate:.2f} jobs/s; worker/bare = {ratio:.2f} "
        f"({verdict} the {TARGET_RATIO} target)"
    )
    return 0


if __name__ == "__main__":
    with Measured("bench/e2e_throughput.py"):
        code = main()
    sys.exit(code)
