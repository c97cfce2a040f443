"""CPU per job: what the platform spends on a job that a bare Playwright loop does not.

    .venv/bin/python bench/cpu_per_job.py [--jobs 40] [--rounds 6]

The same job as bench/e2e_throughput.py, run by a bare loop (one Chromium launched as the
worker launches it, a fresh context per job, concurrency 2) and by the local stack (one
worker, 2 slots), in alternating rounds. For each side it reads the CPU time (user +
system, from the kernel) of every process taking part and prints it per job, by part:

- bare loop: the bench's Python (Playwright's client; the demo site's thread), the driver
  and Chromium;
- platform: the worker (Python, driver, Chromium and the egress proxy inside it), the
  embedded AWS (moto), each Lambda function's execution environment, and the bench's own
  process (the local API gateway and event-source pollers, the submitting client, the demo
  site).

On a machine whose cores are busy, jobs per second follow CPU per job, so
``bare / platform`` of CPU per job is the throughput ratio the platform would reach there.
On AWS the embedded AWS's share is not on the worker's machine at all. CPU time does not
depend on how loaded the machine is the way wall-clock time does, so these figures move
less from run to run than throughput does.

The rounds alternate (bare first, then the platform first, ...) so that drifting load weighs
on both sides alike; each round pairs one bare run with one platform run, and the ratio of
each pair is a sample. Prints the whole-platform table, then the per-round ratios' median
and spread, and ends with the worker-only line the target names (the worker's Python,
driver and Chromium against the bare loop's; the embedded AWS and the function stand-ins
are not the worker's bill on AWS):
``CPU per job: bare <X> ms, worker <Y> ms; worker/bare = <R>``. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from rich.console import Console
from rich.table import Table

from bench.common import bare_loop, workflow
from bench.e2e_throughput import wait_final
from devstack.stack import LocalStack

console = Console()
BENCH = "bench process"
WORKER = "worker"


def _cpu(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def _part(process: psutil.Process) -> str:
    """Which part of the stack a child process of the bench is."""
    try:
        args = process.cmdline()
    except psutil.Error:
        return "gone"
    line = " ".join(args)
    if "devstack.embedded_aws" in line:
        return "embedded AWS"
    if "devstack.lambda_env" in line:
        handler = next((a for a in args if a.startswith("functions.")), "functions.?")
        return f"Lambda {handler.split('.')[1]}"
    if "browser_task" in line:
        return WORKER
    return "other"


def snapshot() -> dict[str, float]:
    """CPU seconds so far of the bench process and of each part under it; a child's own
    children (the worker's Chromium) count toward it."""
    me = psutil.Process()
    parts: dict[str, float] = defaultdict(float)
    parts[BENCH] = _cpu(me)
    for child in me.children():
        part = _part(child)
        if part == WORKER:  # its Python, and under it the driver and Chromium
            parts["worker: Python"] += _cpu(child)
            for process in _descendants(child):
                parts[f"worker: {_browser_part(process)}"] += _cpu(process)
            continue
        parts[part] += _cpu(child) + sum(_cpu(c) for c in _descendants(child))
    return parts


def _browser_part(process: psutil.Process) -> str:
    try:
        name = process.name()
    except psutil.Error:
        return "gone"
    return "driver" if name.startswith("node") else "Chromium"


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def bare_round(site: str, jobs: int) -> dict[str, float]:
    """CPU per job of a bare loop, sampled after its warm-up and after its last job (its
    browser exits when the loop ends, so it is read while it still runs)."""
    marks: list[dict[str, float]] = []

    def on_job() -> None:
        me = psutil.Process()
        mark: dict[str, float] = defaultdict(float, {BENCH: _cpu(me)})
        # The bare loop's driver (the bench's one child that is no part of the stack) and
        # the Chromium under it.
        for child in me.children():
            if _part(child) == "other":
                for process in [child, *_descendants(child)]:
                    mark[_browser_part(process)] += _cpu(process)
        marks.append(mark)

    asyncio.run(bare_loop(site, jobs, 2, launch="worker", warmup=4, on_job=on_job))
    first, last = marks[3], marks[-1]
    return {part: (last[part] - first[part]) / (len(marks) - 4) for part in last if part != "gone"}


def platform_round(stack: LocalStack, jobs: int) -> dict[str, float]:
    body = workflow(stack.site_url)
    with stack.client() as api:
        before = snapshot()
        ids = [api.submit(body).job_id for _ in range(jobs)]
        # Read by key from the table every 2 s: next to nothing on the measured side.
        wait_final(stack, ids, timeout_s=600)
        after = snapshot()
    return {part: (after[part] - before.get(part, 0.0)) / jobs for part in after}


def worker_cpu(platform: dict[str, float]) -> float:
    """The worker's own CPU per job: its Python, its driver and its Chromium."""
    return sum(v for part, v in platform.items() if part.startswith(f"{WORKER}:"))


def totals_of(sides: dict[str, list[dict[str, float]]]) -> list[float]:
    return [sum(r.values()) for r in sides["platform"]]


def spread(ratios: list[float]) -> str:
    """The per-round ratios, their median and how far the farthest lies from it."""
    median = statistics.median(ratios)
    far = max(abs(r - median) for r in ratios) / median
    each = ", ".join(f"{r:.2f}" for r in ratios)
    return (
        f"median {median:.3f}, spread +/-{far:.1%} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}): {each}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40, help="jobs per round and side")
    parser.add_argument("--rounds", type=int, default=6, help="pairs of runs (bare, platform)")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    sides: dict[str, list[dict[str, float]]] = {"bare": [], "platform": []}
    with LocalStack(api_port=0, workers=1, concurrency=2) as stack:
        platform_round(stack, 4)  # warm-up: every environment has served a job
        for index in range(args.rounds):
            order = ["bare", "platform"] if index % 2 == 0 else ["platform", "bare"]
            for side in order:
                with console.status(f"round {index + 1}/{args.rounds}: {side}…"):
                    started = time.monotonic()
                    if side == "bare":
                        sides[side].append(bare_round(stack.site_url, args.jobs))
                    else:
                        sides[side].append(platform_round(stack, args.jobs))
                    console.print(f"round {index + 1} {side}: {time.monotonic() - started:.1f} s")
        stack.cleanup_logs()
    totals = {}
    for side, rounds in sides.items():
        parts = sorted(
            {p for r in rounds for p in r}, key=lambda p: -sum(r.get(p, 0) for r in rounds)
        )
        table = Table(
            f"{side}: part", "CPU ms per job", *(f"round {i + 1}" for i in range(len(rounds)))
        )
        total = [sum(r.values()) for r in rounds]
        for part in parts:
            values = [r.get(part, 0.0) for r in rounds]
            if max(values) * 1000 < 0.5:
                continue
            mean = sum(values) / len(values)
            table.add_row(part, f"{mean * 1000:.1f}", *(f"{v * 1000:.1f}" for v in values))
        table.add_row(
            "total", f"{sum(total) / len(total) * 1000:.1f}", *(f"{t * 1000:.1f}" for t in total)
        )
        console.print(table)
        totals[side] = sum(total) / len(total)
    print(
        f"CPU per job, whole platform: bare {totals['bare'] * 1000:.0f} ms, platform "
        f"{totals['platform'] * 1000:.0f} ms; bare/platform = "
        f"{totals['bare'] / totals['platform']:.2f}"
    )
    bare = [sum(r.values()) for r in sides["bare"]]
    worker = [worker_cpu(r) for r in sides["platform"]]
    whole = [b / p for b, p in zip(bare, totals_of(sides), strict=True)]
    print(f"bare / platform per round: {spread(whole)}")
    ratios = [w / b for w, b in zip(worker, bare, strict=True)]
    print(f"worker / bare per round: {spread(ratios)}")
    print(
        f"CPU per job: bare {statistics.median(bare) * 1000:.0f} ms, worker "
        f"{statistics.median(worker) * 1000:.0f} ms; worker/bare = {statistics.median(ratios):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
