"""Cost: what 1,000 ten-second jobs cost on AWS, from the platform's own usage records.

    .venv/bin/python bench/cost.py [--jobs 20] [--concurrency 2] [--sleep-ms 10000] [--stage prod]

On the local stack (moto, real Chromium), a fresh tenant runs ``--jobs`` jobs that each open
the demo site's home page (on 127.0.0.1) and keep their slot ~10 s (a ``sleep`` step), at the
worker's concurrency. The figures are not timed here: they are read back through the API
(``GET /v1/usage``, the tenant's own report: jobs, attempts, browser-seconds, artifact bytes
and uploads, as the worker recorded them), scaled to 1,000 jobs and priced with the same
code and price table the API uses (``pagefleet.tenancy.usage.priced``), with the Fargate
task of the stage's standard pool from ``infra/config.py`` (``pricing_worker``, the shape the
deployed API is configured with). Around the browser (API call, queue, table writes, Lambda)
the counts are ``as_priced``'s per-job estimates, not measurements.

It prints each service's share, what Fargate Spot would give, and ends with one line per
region; before those, the same usage priced on each Fargate architecture (``--architecture``
picks the one the table and the lines use; default: the stage's). Target: <= $0.05 per
1,000 jobs in us-east-1, on demand. It asserts nothing about time.

Slots are the other half of the price: it samples the worker's process tree (PSS, the way
``bench/worker_memory.py`` does) idle before the measured jobs and busy during them, and its
CPU, and prints for each pool of the stage the slots a task fits (``recommended_slots``: by
memory, 80 % of the task's with the idle tree's share fixed and each busy slot's on top, and
by CPU, 70 % of the task's vCPU at the measured CPU per slot-second), then the standard
pool's price at that many slots. The demo page is light: a real page's renderer takes more
(docs/decisions.md, "Worker sizing from the memory figures"), which is why it also prints
the slots at that allowance.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import TypeAdapter
from rich.console import Console
from rich.table import Table

from bench.common import Measured, MemoryRun, ran_every_job, sampling, wait_all
from pagefleet.pricing import REGIONS, Worker, price_table
from pagefleet.tenancy.usage import UsageRow, as_priced, priced
from pagefleet.tenancy.views import UsageLine

if TYPE_CHECKING:
    from pagefleet.client import PagefleetClient

TARGET_USD = 0.05
TARGET_REGION = "us-east-1"
PER = 1000
TENANT = "cost-bench"
# What a task may fill: the browser is recycled at 80 % of its memory (PoolConfig's
# browser_rss_limit_mb), and CPU is kept under 70 % so a slow page has room.
MEMORY_SHARE = 0.8
CPU_SHARE = 0.7
# A real page's renderer and context, per slot (docs/decisions.md, 2026-11-30).
REAL_PAGE_SLOT_MB = 300.0
console = Console(width=110)


def job(url: str, n: int, sleep_ms: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"action": "goto", "url": f"{url}/?n={n}"}]
    if sleep_ms:
        steps.append({"action": "sleep", "ms": sleep_ms})
    steps.append({"action": "extract", "name": "title", "selector": "h1"})
    return {"name": "cost-bench", "max_attempts": 1, "steps": steps}


# --- pure parts ------------------------------------------------------------------------------
def per_thousand(line: UsageLine | UsageRow, per: int = PER) -> UsageRow:
    """The measured counts of ``line`` scaled from its jobs to ``per`` jobs."""
    if line.jobs <= 0:
        raise ValueError("no jobs recorded: nothing to scale")
    factor = per / line.jobs
    return UsageRow(
        tenant_id=getattr(line, "tenant_id", None) or TENANT,
        day=getattr(line, "day", None) or "",
        jobs=per,
        attempts=round(line.attempts * factor),
        browser_seconds=line.browser_seconds * factor,
        page_requests=round(line.page_requests * factor),
        artifact_bytes=round(line.artifact_bytes * factor),
        artifact_puts=round(line.artifact_puts * factor),
    )


def stage_worker(stage: str) -> Worker:
    """The standard pool's Fargate task of ``stage``, exactly as the API is configured."""
    from infra.config import STAGES  # CDK: imported only when the bench runs
    from infra.constructs.api import pricing_worker

    return TypeAdapter(Worker).validate_python(pricing_worker(STAGES[stage]))


def by_architecture(scaled: UsageRow, worker: Worker, retention: int) -> dict[str, float]:
    """On-demand total in ``TARGET_REGION`` of the same usage on each Fargate architecture."""
    return {
        arch: priced(scaled, dataclasses.replace(worker, architecture=arch, spot=False), retention)[
            TARGET_REGION
        ]["total_usd"]
        for arch in ("x86_64", "arm64")
    }


@dataclass(frozen=True)
class Footprint:
    """The worker's tree as measured: idle PSS, PSS per busy slot, CPU per slot-second."""

    idle_mb: float
    per_slot_mb: float
    cpu_per_slot_s: float


def recommended_slots(memory_mib: int, cpu_units: int, footprint: Footprint) -> tuple[int, int]:
    """Slots a task of this size fits (by memory, by CPU); at least one each."""
    room_mb = memory_mib * MEMORY_SHARE - footprint.idle_mb
    by_memory = int(room_mb // footprint.per_slot_mb) if footprint.per_slot_mb > 0 else 1
    cpus = cpu_units / 1024 * CPU_SHARE
    by_cpu = int(cpus / footprint.cpu_per_slot_s) if footprint.cpu_per_slot_s > 0 else by_memory
    return max(1, by_memory), max(1, by_cpu)


def footprint_of(
    idle: MemoryRun, busy: MemoryRun, slots: int, cpu_s: float, slot_s: float
) -> Footprint:
    """``busy``: sampled with ``slots`` busy; ``cpu_s`` of the tree over ``slot_s`` slot-seconds."""
    idle_mb = idle.steady()
    per_slot = max(0.0, busy.steady() - idle_mb) / max(1, slots)
    return Footprint(idle_mb, per_slot, cpu_s / slot_s if slot_s > 0 else 0.0)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds so far of a process and its descendants (user + system)."""
    import psutil

    total = 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def recording(line: UsageLine) -> dict[str, Any]:
    """What ``--record`` writes: the usage recorded, and when, where and under what load."""
    import subprocess

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "what": "the usage the platform recorded for bench/cost.py's ten-second jobs; "
        "docs/deploy.md's cost tables are priced from it (scripts/docs_pages/cost_pages.py)",
        "recorded": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "load": f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        "command": " ".join([".venv/bin/python bench/cost.py", *sys.argv[1:]]),
        "usage": {
            key: getattr(line, key)
            for key in (
                "jobs",
                "attempts",
                "browser_seconds",
                "page_requests",
                "artifact_puts",
                "artifact_bytes",
            )
        },
    }


def region_line(region: str, total_usd: float) -> str:
    return f"{region}: ${total_usd:.3f} per 1,000 jobs"


# --- the run ---------------------------------------------------------------------------------
def recorded_usage(client: PagefleetClient, jobs: int, first: str) -> UsageLine:
    """The tenant's usage report once every attempt's usage is in it (recorded as it ends)."""
    deadline = time.monotonic() + 60
    while True:
        last = datetime.now(UTC).date().isoformat()
        total = client.usage(first=first, last=last).total
        if total.jobs >= jobs or time.monotonic() > deadline:
            return total
        time.sleep(1)


def run(args: argparse.Namespace) -> tuple[UsageLine, int, list[str], Footprint]:
    from devstack.stack import LocalStack  # the local stack: only when the bench runs

    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with LocalStack(api_port=0, workers=1, concurrency=args.concurrency) as stack:
        url = stack.site_url  # the demo site's home page, on 127.0.0.1
        # Warm-up under another tenant: browsers launched and functions warm, and none of it
        # in the measured tenant's usage.
        warm = stack.client(stack.create_tenant_key("cost-warmup"))
        warm_ids = [warm.submit(job(url, n, 0)).job_id for n in range(args.concurrency)]
        wait_all(warm, warm_ids, timeout=300, poll=2)  # polling every 2 s: a shared machine

        admin = stack.client(stack.create_tenant_key("ops", admin=True))
        admin.set_limits(TENANT, submits_per_minute=10_000, max_queued=10_000)
        client = stack.client(stack.create_tenant_key(TENANT))
        retention = client.tenant().limits.retention_days
        first = datetime.now(UTC).date().isoformat()
        console.print(
            f"local stack: 1 worker x {args.concurrency} slots; {args.jobs} jobs "
            f"(goto {url}, sleep {args.sleep_ms} ms, extract)"
        )
        pid = stack.worker_processes[0].pid
        idle, busy = MemoryRun("idle", 0), MemoryRun("busy", args.jobs)
        with sampling(idle, pid, 0.5):
            time.sleep(4)  # the warmed worker between jobs: browser up, no context
        cpu_before = tree_cpu_s(pid)
        ids = [client.submit(job(url, n, args.sleep_ms)).job_id for n in range(args.jobs)]
        rounds = -(-args.jobs // args.concurrency)
        with sampling(busy, pid, 0.5):
            finished = wait_all(
                client, ids, timeout=120 + rounds * (args.sleep_ms / 1000 + 30), poll=2
            )
        cpu_s = tree_cpu_s(pid) - cpu_before
        statuses = [j.status.value for j in finished]
        usage = recorded_usage(client, args.jobs, first)
        footprint = footprint_of(idle, busy, args.concurrency, cpu_s, usage.browser_seconds)
        return usage, retention, statuses, footprint


def slots_report(
    stage: str, footprint: Footprint, line: UsageLine, worker: Worker, retention: int
) -> None:
    """Each pool's slots from the measured footprint, and the standard pool priced at them."""
    from infra.config import STAGES  # CDK: imported only when the bench runs

    console.print(
        f"worker tree measured: idle {footprint.idle_mb:.0f} MB PSS, "
        f"{footprint.per_slot_mb:.0f} MB PSS per busy slot, "
        f"{footprint.cpu_per_slot_s * 1000:.1f} ms CPU per slot-second"
    )
    real = dataclasses.replace(footprint, per_slot_mb=max(footprint.per_slot_mb, REAL_PAGE_SLOT_MB))
    for pool in STAGES[stage].pools:
        name = pool.name
        by_memory, by_cpu = recommended_slots(pool.memory_mib, pool.cpu, footprint)
        real_memory, _ = recommended_slots(pool.memory_mib, pool.cpu, real)
        fits = min(by_memory, by_cpu)
        console.print(
            f"pool {name} ({pool.cpu / 1024:g} vCPU, {pool.memory_mib / 1024:g} GB, "
            f"{pool.concurrency} slots today): recommended {fits} slots "
            f"(memory {by_memory}, CPU {by_cpu}); {min(real_memory, by_cpu)} at "
            f"{REAL_PAGE_SLOT_MB:.0f} MB a slot (a real page)"
        )
        if name == "standard":
            for slots in sorted({fits, min(real_memory, by_cpu)}):
                packed = dataclasses.replace(worker, slots=slots)
                total = priced(per_thousand(line), packed, retention)[TARGET_REGION]["total_usd"]
                console.print(
                    f"  {TARGET_REGION} on-demand at {slots} slots a task: "
                    f"${total:.3f} per 1,000 jobs"
                )


def report(line: UsageLine, worker: Worker, retention: int, stage: str) -> None:
    scaled = per_thousand(line)
    costs = priced(scaled, worker, retention)
    # Fargate Spot places x86_64 tasks only: Spot's figures are the x86_64 task's.
    spot = priced(scaled, dataclasses.replace(worker, spot=True, architecture="x86_64"), retention)
    console.print(
        f"recorded by the platform: {line.jobs} jobs, {line.attempts} attempts, "
        f"{line.browser_seconds:.1f} browser-seconds "
        f"({line.browser_seconds / max(1, line.jobs):.2f} s a job), "
        f"{line.page_requests} page requests, {line.artifact_puts} artifact uploads, "
        f"{line.artifact_bytes / 1024:.0f} KiB of artifacts"
    )
    priced_usage = as_priced(scaled)
    console.print(
        f"per {PER:,} jobs, as priced: {priced_usage.browser_seconds:,.0f} slot-seconds, "
        f"{priced_usage.api_requests:,} API requests, "
        f"{priced_usage.lambda_invocations:,} Lambda invocations, "
        f"{priced_usage.queue_requests:,} SQS requests, {priced_usage.table_writes:,} "
        f"DynamoDB writes / {priced_usage.table_reads:,} reads, "
        f"{priced_usage.artifact_puts:,} S3 puts"
    )
    arch = "spot" if worker.spot else "on-demand"
    console.print(
        f"Fargate task ({stage} stage, standard pool): {worker.vcpu:g} vCPU, "
        f"{worker.memory_gb:g} GB, {worker.slots} slots, {worker.architecture}, {arch}; "
        f"artifacts kept {retention} days; prices as of {price_table()['as_of']}"
    )
    table = Table(
        "service", *(f"{r} $/1,000" for r in REGIONS), "share", f"{TARGET_REGION} spot (x86_64)"
    )
    services = costs[TARGET_REGION]["by_service_usd"]
    target_total = costs[TARGET_REGION]["total_usd"]
    for service in services:
        share = services[service] / target_total if target_total else 0.0
        table.add_row(
            service,
            *(f"{costs[r]['by_service_usd'][service]:.4f}" for r in REGIONS),
            f"{share:.0%}",
            f"{spot[TARGET_REGION]['by_service_usd'][service]:.4f}",
        )
    table.add_row(
        "total",
        *(f"{costs[r]['total_usd']:.4f}" for r in REGIONS),
        "100%",
        f"{spot[TARGET_REGION]['total_usd']:.4f}",
    )
    console.print(table)
    for arch, total in by_architecture(scaled, worker, retention).items():
        console.print(f"{TARGET_REGION} on-demand on {arch}: ${total:.3f} per 1,000 jobs")
    for region in REGIONS:
        console.print(
            f"Fargate Spot (x86_64 only), {region}: ${spot[region]['total_usd']:.3f} "
            f"per 1,000 jobs "
            f"(on-demand ${costs[region]['total_usd']:.3f})"
        )
    verdict = "meets" if target_total <= TARGET_USD else "misses"
    console.print(
        f"{TARGET_REGION} on-demand: ${target_total:.3f} per 1,000 jobs, {verdict} the "
        f"${TARGET_USD:.2f} target (without idle capacity: min_tasks, NAT gateways)"
    )
    for region in REGIONS:
        print(region_line(region, costs[region]["total_usd"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's slots")
    parser.add_argument("--sleep-ms", type=int, default=10_000, help="each job's sleep step")
    parser.add_argument(
        "--stage", default="prod", help="infra/config.py stage whose standard pool is priced"
    )
    parser.add_argument("--architecture", choices=("x86_64", "arm64"), help="default: the stage's")
    parser.add_argument(
        "--record",
        type=Path,
        help="write the recorded usage here (bench/recorded/cost_usage.json prices docs/deploy.md)",
    )
    args = parser.parse_args()
    worker = stage_worker(args.stage)
    if args.architecture:
        worker = dataclasses.replace(worker, architecture=args.architecture)
    line, retention, statuses, footprint = run(args)
    # The usage of jobs that failed is not a ten-second job's: no price from it.
    succeeded = statuses.count("succeeded")
    if not ran_every_job("the local stack", succeeded, args.jobs):
        return 1
    # A report read before every attempt's usage was recorded prices part of the run.
    if not ran_every_job("the usage report", line.jobs, args.jobs):
        return 1
    report(line, worker, retention, args.stage)
    if args.record:
        args.record.write_text(json.dumps(recording(line), indent=2) + "\n")
    slots_report(args.stage, footprint, line, worker, retention)
    return 0


if __name__ == "__main__":
    with Measured("bench/cost.py"):
        code = main()
    sys.exit(code)
