"""Fairness: tenant B's queue delay while tenant A floods the fleet, against B on an idle one.

    .venv/bin/python bench/fairness.py [--flood 300] [--jobs 5] [--workers 2] [--concurrency 2]

On the local stack (moto, real Chromium), in one run:

1. idle: B submits its jobs on an idle fleet;
2. flood, A capped: A submits ``--flood`` jobs at once (through ``POST /v1/batches``), then B
   submits its jobs; A's ``max_running`` is half the fleet's slots (the stage default does
   the same on AWS, where a tenant's cap is well below the fleet);
3. flood, A uncapped (the baseline without fairness): the same with A's ``max_running`` at
   the fleet's size, so A's backlog is ahead of B in the queue.

B's queue delay is read from the records (first attempt's start minus the job's creation),
never timed by this script. On AWS the standard queues also carry ``MessageGroupId`` =
tenant (SQS fair queues), which moto does not model: the figures here are the running cap's
part alone. This prints figures; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from bench.common import Measured, ran_every_job, wait_all
from devstack.stack import LocalStack
from pagefleet.client import Job

console = Console()
# Jobs per POST /v1/batches (up to 100; the embedded AWS answers slower than AWS does).
BATCH = 50


def job(site: str, tenant: str, n: int) -> dict[str, Any]:
    return {
        "name": f"{tenant}-fairness",
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": f"{site}/"},
            {"action": "extract", "name": "title", "selector": "h1"},
        ],
        "inputs": {"n": n},
    }


def epoch(at: str | None) -> float:
    assert at is not None
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def queue_delay(done: Job) -> float:
    first = min(done.attempts, key=lambda a: a.attempt)
    return epoch(first.started_at) - epoch(done.created_at)


@dataclass
class Scenario:
    name: str
    a_cap: int | None
    b_delays: list[float]
    a_seconds: float = 0.0
    a_jobs: int = 0
    failed: int = 0

    def row(self) -> list[str]:
        delays = sorted(self.b_delays)
        p50 = statistics.median(delays)
        a_rate = f"{self.a_jobs / self.a_seconds:.1f}/s" if self.a_seconds else "-"
        return [
            self.name,
            "-" if self.a_cap is None else str(self.a_cap),
            f"{p50:.2f}",
            f"{delays[-1]:.2f}",
            a_rate,
            str(self.failed),
        ]


def run(stack: LocalStack, args: argparse.Namespace) -> list[Scenario]:
    admin = stack.client(stack.create_tenant_key("ops", admin=True))
    tenant_a = stack.client(stack.create_tenant_key("tenant-a"))
    tenant_b = stack.client(stack.create_tenant_key("tenant-b"))
    slots = args.workers * args.concurrency
    for name in ("tenant-a", "tenant-b"):
        admin.set_limits(name, submits_per_minute=10_000, max_queued=10_000)
    site = stack.site_url
    # Warm-up: every slot has its browser started and the functions are warm.
    wait_all(tenant_b, [tenant_b.submit(job(site, "warm", n)).job_id for n in range(slots)])

    out: list[Scenario] = []
    b_ids = [tenant_b.submit(job(site, "b", n)).job_id for n in range(args.jobs)]
    idle = wait_all(tenant_b, b_ids)
    out.append(Scenario("idle", None, [queue_delay(j) for j in idle], failed=_failed(idle)))

    for label, cap in (("flood, A capped", max(1, slots // 2)), ("flood, A uncapped", slots)):
        admin.set_limits("tenant-a", max_running=cap)
        time.sleep(1)  # the limits cache of every function and worker (1 s here)
        started = time.time()
        a_ids: list[str] = []
        for start in range(0, args.flood, BATCH):
            chunk = [job(site, "a", n) for n in range(start, min(start + BATCH, args.flood))]
            batch = tenant_a.submit_batch(chunk)
            a_ids += [r.job_id for r in batch.results if r.job_id]
        b_ids = [tenant_b.submit(job(site, "b", n)).job_id for n in range(args.jobs)]
        b_done = wait_all(tenant_b, b_ids)
        a_done = wait_all(tenant_a, a_ids)
        seconds = max(epoch(j.finished_at) for j in a_done) - started
        scenario = Scenario(
            label,
            cap,
            [queue_delay(j) for j in b_done],
            a_seconds=max(seconds, 0.001),
            a_jobs=len(a_done),
            failed=_failed(b_done) + _failed(a_done),
        )
        out.append(scenario)
        console.print(f"  {label}: B p50 {statistics.median(scenario.b_delays):.2f} s")
    return out


def _failed(jobs: list[Job]) -> int:
    return sum(1 for j in jobs if j.status.value != "succeeded")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=300, help="tenant A's jobs")
    parser.add_argument("--jobs", type=int, default=5, help="tenant B's jobs per scenario")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    fast = {"PAGEFLEET_LIMITS_CACHE_SECONDS": "1"}
    console.print(
        f"local stack: {args.workers} workers x {args.concurrency} slots; tenant A floods "
        f"{args.flood} jobs, tenant B submits {args.jobs} after them"
    )
    with LocalStack(
        api_port=0,
        workers=args.workers,
        concurrency=args.concurrency,
        worker_env=fast,
        lambda_env=fast,
    ) as stack:
        scenarios = run(stack, args)
    table = Table(
        "scenario", "A max_running", "B delay p50 (s)", "B delay max (s)", "A rate", "failed"
    )
    for scenario in scenarios:
        table.add_row(*scenario.row())
    console.print(table)
    # A's jobs that failed fast (or were not accepted) left B's no queue to wait in: no ratio
    # from such a scenario, nor from an idle one whose B jobs failed.
    whole = [
        s
        for s in scenarios
        if ran_every_job(
            s.name,
            len(s.b_delays) + s.a_jobs - s.failed,
            args.jobs + (args.flood if s.a_cap is not None else 0),
        )
    ]
    if scenarios[0] not in whole:
        return 1
    idle = statistics.median(scenarios[0].b_delays)
    for scenario in whole[1:]:
        ratio = statistics.median(scenario.b_delays) / max(idle, 0.001)
        console.print(f"{scenario.name}: B's median queue delay is {ratio:.1f}x its idle value")
    return 0 if len(whole) == len(scenarios) else 1


if __name__ == "__main__":
    with Measured("bench/fairness.py"):
        code = main()
    sys.exit(code)
