"""CPU per job: what the platform spends on a job that a bare Playwright loop does not.

    .venv/bin/python bench/cpu_per_job.py [--jobs 40] [--rounds 10] [--bare-egress]
        [--path '/gallery?images=100']

The same job as bench/e2e_throughput.py, run by a bare loop (one Chromium launched as the
worker launches it, a fresh context per job, concurrency 2, in a child Python of its own)
and by the local stack (one worker, 2 slots), in alternating rounds. For each side it reads
the CPU time (user + system, from the kernel) of every process taking part, with what the
children it reaped used (each job's renderer exits with the job's context: read live only,
most of Chromium's CPU was missed), and prints it per job, by part:

- bare loop: its Python (Playwright's client), the driver and Chromium;
- platform: the worker (Python, driver, Chromium and the egress proxy inside it), the
  embedded AWS (moto), each Lambda function's execution environment, and the bench's own
  process (the local API gateway and event-source pollers, the submitting client, the demo
  site).

On a machine whose cores are busy, jobs per second follow CPU per job, so
``bare / platform`` of CPU per job is the throughput ratio the platform would reach there.
On AWS the embedded AWS's share is not on the worker's machine at all. CPU time does not
depend on how loaded the machine is the way wall-clock time does, but a loaded machine
still inflates it (caches, frequency), so the rounds alternate (bare first, then the
platform first, ...) and each round's pair gives one ratio: drifting load weighs on both
sides of a pair alike, and the median of the pairs' ratios is what two runs agree on.
Prints the commit and the load before and after, the whole-platform table, the per-round
ratios (median, middle half, extremes), and ends with the worker-only line the target names
(the worker's Python, driver and Chromium against the bare loop's; the embedded AWS and the
function stand-ins are not the worker's bill on AWS):
``CPU per job: bare <X> ms, worker <Y> ms; worker/bare = <R>`` (medians over the rounds).
``--path`` reads another page of the demo site on both sides: the front page makes two
requests, a real page tens to hundreds, and a browser's every request costs the worker
what it costs no bare loop (``/gallery?images=N``: the same page making N+2;
``devstack.demo_gallery``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from rich.console import Console
from rich.table import Table

from bench.common import (
    Measured,
    bare_loop,
    browser_cpu_s,
    child_answer,
    lift_submission_rate,
    python,
    python_env,
    ran_every_job,
    workflow,
)
from bench.e2e_throughput import wait_final
from devstack.stack import LocalStack
from pagefleet.jobs.states import JobStatus

console = Console()
BENCH = "bench process"
WORKER = "worker"
BARE_WARMUP = 4


def _cpu(process: psutil.Process) -> float:
    """``process``'s own CPU and what the children it reaped used."""
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system + times.children_user + times.children_system


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
    parts[BENCH] = _own(me)
    for child in me.children():
        part = _part(child)
        if part == WORKER:  # its Python, and under it the driver and Chromium
            parts["worker: Python"] += _own(child)
            parts["worker: driver"] += _cpu(child) - _own(child)  # a driver that exited
            for browser_part, seconds in browser_cpu_s(child).items():
                parts[f"worker: {browser_part}"] += seconds
            continue
        parts[part] += _cpu(child) + sum(_cpu(p) for p in _descendants(child))
    return parts


def _own(process: psutil.Process) -> float:
    """``process``'s own CPU, without its reaped children (the bench's are the bare loops,
    counted on their own side)."""
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def bare_round(
    site: str, jobs: int, egress: bool = False, path: str = "/"
) -> tuple[dict[str, float], int]:
    """CPU per job of a bare loop, run in a child Python of its own so that nothing else is
    counted on its side: the bench process also runs the local stack's gateway and pollers
    and the demo site, which no bare loop has. The child reads its own tree's CPU after its
    warm-up and after its last job (its browser exits when the loop ends). Returns its CPU
    per job by part and the jobs that succeeded."""
    done = subprocess.run(
        [python(), __file__, "--bare-child", site, str(jobs), path, *(["egress"] * egress)],
        env=python_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the bare loop failed:\n{done.stderr[-4000:]}")
    answer = child_answer(done.stdout)
    return {k: float(v) for k, v in answer["per_job"].items()}, int(answer["succeeded"])


def bare_child(site: str, jobs: int, egress: bool = False, path: str = "/") -> None:
    """In the child: run the bare loop and print its CPU per job by part, as JSON."""
    marks: list[dict[str, float]] = []
    me = psutil.Process()

    def on_job() -> None:
        mark = {"bare: Python": _own(me)}
        mark.update({f"bare: {part}": s for part, s in browser_cpu_s(me).items()})
        marks.append(mark)

    looped = bare_loop(
        site, jobs, 2, launch="worker", warmup=BARE_WARMUP, on_job=on_job, egress=egress, path=path
    )
    ok, _seconds = asyncio.run(looped)
    first, last = marks[BARE_WARMUP - 1], marks[-1]
    per_job = {part: (last[part] - first[part]) / (len(marks) - BARE_WARMUP) for part in last}
    print(json.dumps({"succeeded": ok, "per_job": per_job}))


def platform_round(stack: LocalStack, jobs: int, path: str = "/") -> tuple[dict[str, float], int]:
    """CPU per job by part of the local stack, and the jobs that succeeded. A round in which
    the worker recycled its browser reads its Chromium as unreadable (below zero: see
    ``whole_rounds``)."""
    body = workflow(stack.site_url, path)
    with stack.client() as api:
        browsers, before = _browsers(), snapshot()
        ids = [api.submit(body).job_id for _ in range(jobs)]
        # Read by key from the table every 2 s: next to nothing on the measured side.
        counts, _last = wait_final(stack, ids, timeout_s=600)
        after = snapshot()
    per_job = {part: (after[part] - before.get(part, 0.0)) / jobs for part in after}
    if _browsers() != browsers:
        per_job[f"{WORKER}: Chromium"] = -1.0
    return per_job, counts.get(JobStatus.SUCCEEDED, 0)


def _browsers() -> set[int]:
    """The worker's browsers now: the processes its Playwright drivers started."""
    found = set()
    for child in psutil.Process().children():
        if _part(child) != WORKER:
            continue
        for process in _descendants(child):
            with contextlib.suppress(psutil.Error):
                if process.name().startswith("node"):
                    found |= {p.pid for p in process.children()}
    return found


def worker_cpu(platform: dict[str, float]) -> float:
    """The worker's own CPU per job: its Python, its driver and its Chromium."""
    return sum(v for part, v in platform.items() if part.startswith(f"{WORKER}:"))


def spread(ratios: list[float]) -> str:
    """The per-round ratios: their median, the interquartile range around it (what two
    runs' medians differ by, roughly) and the extremes."""
    median = statistics.median(ratios)
    if len(ratios) >= 4:
        low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
    else:
        low, high = min(ratios), max(ratios)
    each = ", ".join(f"{r:.2f}" for r in ratios)
    return (
        f"median {median:.3f}, middle half {low:.3f}-{high:.3f} "
        f"(+/-{(high - low) / 2 / median:.1%}), min {min(ratios):.2f}, max {max(ratios):.2f}: "
        f"{each}"
    )


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--bare-child"]:
        bare_child(
            sys.argv[2], int(sys.argv[3]), egress=sys.argv[5:6] == ["egress"], path=sys.argv[4]
        )
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40, help="jobs per round and side")
    parser.add_argument("--rounds", type=int, default=10, help="pairs of runs (bare, platform)")
    parser.add_argument(
        "--bare-egress",
        action="store_true",
        help="the bare loop's requests through the worker's egress proxy too (its Python "
        "counts as the bare loop's): what the worker adds besides the egress check",
    )
    parser.add_argument(
        "--path",
        default="/",
        help="the demo site's page each job reads, on both sides (default: its front page, "
        "two requests; '/gallery?images=100': the same page making 102)",
    )
    args = parser.parse_args(argv)
    if not args.path.startswith("/"):
        parser.error("--path must start with '/'")
    if args.jobs < 2 or args.rounds < 1:
        parser.error("--jobs must be at least 2 and --rounds at least 1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with Measured("bench/cpu_per_job.py") as measured:
        print(f"each job reads {args.path}")
        measured_rounds, ran = run_rounds(args.jobs, args.rounds, args.bare_egress, args.path)
        complete = complete_rounds(measured_rounds, ran, args.jobs)
        sides = whole_rounds(complete)
        report(sides)
        bare = [sum(r.values()) for r in sides["bare"]]
        worker = [worker_cpu(r) for r in sides["platform"]]
        ratios = [w / b for w, b in zip(worker, bare, strict=True)]
        print(f"worker / bare per round: {spread(ratios)}")
        measured.end()
    print(
        f"CPU per job: bare {statistics.median(bare) * 1000:.0f} ms, worker "
        f"{statistics.median(worker) * 1000:.0f} ms; worker/bare = {statistics.median(ratios):.2f}"
    )
    return 0 if complete == measured_rounds else 1


Rounds = dict[str, list[dict[str, float]]]


def run_rounds(
    jobs: int, rounds: int, egress: bool = False, path: str = "/"
) -> tuple[Rounds, dict[str, list[int]]]:
    """``rounds`` pairs of (bare, platform) runs, the order alternating each round: each
    side's CPU per job by part, and the jobs that succeeded, round by round."""
    sides: Rounds = {"bare": [], "platform": []}
    ran: dict[str, list[int]] = {"bare": [], "platform": []}
    with LocalStack(api_port=0, workers=1, concurrency=2) as stack:
        lift_submission_rate(stack)
        platform_round(stack, 4, path)  # warm-up: every environment has served a job
        for index in range(rounds):
            order = ["bare", "platform"] if index % 2 == 0 else ["platform", "bare"]
            for side in order:
                with console.status(f"round {index + 1}/{rounds}: {side}…"):
                    started = time.monotonic()
                    if side == "bare":
                        per_job, ok = bare_round(stack.site_url, jobs, egress, path)
                    else:
                        per_job, ok = platform_round(stack, jobs, path)
                    sides[side].append(per_job)
                    ran[side].append(ok)
                    console.print(f"round {index + 1} {side}: {time.monotonic() - started:.1f} s")
        stack.cleanup_logs()
    return sides, ran


def complete_rounds(sides: Rounds, ran: dict[str, list[int]], jobs: int) -> Rounds:
    """The rounds in which both sides ran every job: a side's failed jobs cost less CPU
    than done ones, and its CPU per job (over the jobs asked) would read as a result."""
    kept = []
    for index in range(len(sides["platform"])):
        # Every side's line printed, not only the first short one's.
        short = [
            s for s in ran if not ran_every_job(f"{s}, round {index + 1}", ran[s][index], jobs)
        ]
        if not short:
            kept.append(index)
    if not kept:
        raise SystemExit("no round in which both sides ran every job")
    return {side: [rounds[i] for i in kept] for side, rounds in sides.items()}


def whole_rounds(sides: dict[str, list[dict[str, float]]]) -> dict[str, list[dict[str, float]]]:
    """The rounds in which every part's CPU could be read whole. When the worker recycles its
    browser (every ``jobs_per_browser`` jobs), the old browser's helpers (zygote, GPU,
    renderers) are orphaned as it exits and leave the worker's tree with the CPU they used
    since the stack started: that round's Chromium reads too low (below zero when they had
    used more than the round), so a round whose browser changed is marked below zero
    (``platform_round``) and the pair is left out."""
    kept = [
        index
        for index, platform in enumerate(sides["platform"])
        if min(platform.values()) >= 0 and min(sides["bare"][index].values()) >= 0
    ]
    if len(kept) < len(sides["platform"]):
        left = [i + 1 for i in range(len(sides["platform"])) if i not in kept]
        print(f"rounds left out (a browser recycled, its tree's CPU not readable): {left}")
    if not kept:
        raise SystemExit("no round could be read whole: run more rounds")
    return {side: [rounds[i] for i in kept] for side, rounds in sides.items()}


def report(sides: dict[str, list[dict[str, float]]]) -> None:
    """A table a side, each part's CPU per job in every round, then the whole platform's
    figure (every process of the local stack: what throughput follows on this machine)."""
    totals = {}
    for side, rounds in sides.items():
        parts = sorted(
            {p for r in rounds for p in r}, key=lambda p: -sum(r.get(p, 0) for r in rounds)
        )
        table = Table(
            f"{side}: part", "CPU ms per job (median)", *(f"r{i + 1}" for i in range(len(rounds)))
        )
        total = [sum(r.values()) for r in rounds]
        for part in parts:
            values = [r.get(part, 0.0) for r in rounds]
            if max(values) * 1000 < 0.5:
                continue
            table.add_row(
                part,
                f"{statistics.median(values) * 1000:.1f}",
                *(f"{v * 1000:.0f}" for v in values),
            )
        table.add_row(
            "total",
            f"{statistics.median(total) * 1000:.1f}",
            *(f"{t * 1000:.0f}" for t in total),
        )
        console.print(table)
        totals[side] = total
    whole = [b / p for b, p in zip(totals["bare"], totals["platform"], strict=True)]
    print(
        f"CPU per job, whole platform (the demo site's serving on its side only): bare "
        f"{statistics.median(totals['bare']) * 1000:.0f} ms, platform "
        f"{statistics.median(totals['platform']) * 1000:.0f} ms"
    )
    print(f"bare / platform per round: {spread(whole)}")


if __name__ == "__main__":
    sys.exit(main())
