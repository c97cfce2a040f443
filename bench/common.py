"""What the benches share: the job they all run, a bare Playwright loop, process-tree PSS.

The job: open the demo site's product list, wait for it, extract the names and links, take a
full-page screenshot (and hash it). The platform runs it as a workflow; the bare loop runs
the same calls on a fresh context per job.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from devstack.stack import LocalStack
    from pagefleet.client import Job, PagefleetClient

MB = 1024 * 1024
REPO_ROOT = Path(__file__).resolve().parents[1]


def workflow(site: str, path: str = "/") -> dict[str, Any]:
    """The bench job: the demo shop's products read from the page at ``path`` (its front
    page by default; ``/gallery?images=N`` is the same page making N+2 requests)."""
    return {
        "name": "bench-extract",
        "inputs": {"site": site},
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": "{{inputs.site}}" + path},
            {"action": "wait_for", "selector": "#products .product"},
            {"action": "extract", "name": "names", "selector": ".product .name", "many": True},
            {
                "action": "extract",
                "name": "links",
                "selector": ".product a.name",
                "kind": "attribute",
                "attribute": "href",
                "many": True,
            },
            {"action": "screenshot", "name": "page.png", "full_page": True},
        ],
    }


# --- what every figure is printed with -----------------------------------------------------
def load_average() -> str:
    """The load average over 1, 5 and 15 minutes (what ``uptime`` prints)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def commit() -> str:
    """The checkout's commit, marked when files differ from it (the figure is then not that
    commit's)."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    sha = git("rev-parse", "--short=9", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return sha + (" + local changes" if changed else "")


class Measured:
    """Prints, around a bench's run, the commit, the time and the load before and after: a
    figure means little without the load it was taken under (2 cores, shared machines).
    ``end()`` prints the load after; a bench whose last line is a target's line calls it
    before printing that line, the others leave it to the ``with`` block's end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ended = False

    def __enter__(self) -> Measured:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        print(
            f"{self.name}: commit {commit()}, {now}, {os.cpu_count()} CPUs; "
            f"load average before {load_average()} (1, 5, 15 min)",
            flush=True,
        )
        return self

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            now = datetime.now(UTC).strftime("%H:%M UTC")
            print(f"load average after {load_average()} (1, 5, 15 min), {now}", flush=True)

    def __exit__(self, *exc: object) -> None:
        self.end()


def ran_every_job(label: str, succeeded: int, jobs: int) -> bool:
    """Whether a side ran every job it was asked to run. One that did not measured less than
    its figure says (a failed loop's idle Python, a child's header read as its answer: the
    memory bench printed a ratio of 28.7 from a bare side of 0 jobs): this says so, and the
    bench prints no ratio or figure with that side."""
    if succeeded == jobs:
        return True
    print(f"no ratio with {label}: {succeeded} of {jobs} jobs succeeded", flush=True)
    return False


def next_line(stream: IO[str], words: tuple[str, ...]) -> str:
    """A child's next line that starts with one of ``words`` ("" at its end): its other
    lines (the header every bench prints, warnings) are not its answer."""
    for line in stream:
        if line.startswith(words):
            return line
    return ""


def child_answer(stdout: str) -> dict[str, Any]:
    """The last line of a child's output that is a JSON object: its answer, whatever else it
    printed around it (a header, warnings)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError(f"no answer in the child's output: {stdout[-400:]!r}")


# --- the bare loop --------------------------------------------------------------------------
async def bare_loop(
    site: str,
    jobs: int,
    concurrency: int,
    *,
    launch: str = "worker",
    warmup: int = 0,
    on_job: Callable[[], None] | None = None,
    egress: bool = False,
    path: str = "/",
) -> tuple[int, float]:
    """Run ``jobs`` jobs (after ``warmup``), ``concurrency`` at a time, each in a fresh
    context of one Chromium. ``launch="worker"`` launches it as the worker does (same
    executable, switches and driver environment); ``"default"`` with Playwright's defaults
    (same executable). ``egress``: every request through the worker's egress proxy, in this
    process, as the worker's browser sends them (what the egress check costs, apart from the
    rest of the worker). ``path``: the page each job reads (see ``workflow``). Returns
    (succeeded, seconds)."""
    from playwright.async_api import async_playwright

    from browser_task.browser.chromium import (
        chromium_args,
        chromium_executable,
        driver_env,
        environment,
        sandbox_enabled,
    )
    from browser_task.egress.guard import EgressPolicy
    from browser_task.egress.proxy import EgressProxy
    from pagefleet.jobs.options import JobOptions
    from pagefleet.specs.settings import WorkerSettings

    settings = WorkerSettings(
        jobs_table="-",
        tenants_table="-",
        artifacts_bucket="-",
        queue_urls={"standard": "-"},
        concurrency=concurrency,
    )
    options = JobOptions()
    tuned = launch == "worker"
    proxy = EgressProxy(EgressPolicy(allow_loopback=True)) if egress else None
    if proxy is not None:
        await proxy.start()
    with environment(driver_env() if tuned else {}):
        pw = await async_playwright().start()
    try:
        browser = await pw.chromium.launch(
            executable_path=chromium_executable(settings, pw),
            headless=settings.headless,
            args=chromium_args(settings, proxy.url if proxy else None) if tuned else [],
            chromium_sandbox=sandbox_enabled(settings),
        )

        async def one() -> bool:
            context = await browser.new_context(
                viewport={"width": options.viewport.width, "height": options.viewport.height},
                accept_downloads=True,
                service_workers="block",
            )
            try:
                page = await context.new_page()
                await page.goto(f"{site}{path}", wait_until="load")
                await page.locator("#products .product").first.wait_for(state="visible")
                names = await page.locator(".product .name").evaluate_all(
                    "els => els.map(e => (e.textContent || '').trim())"
                )
                await page.locator(".product a.name").evaluate_all(
                    "(els, n) => els.map(e => e.getAttribute(n))", "href"
                )
                shot = await page.screenshot(type="png", full_page=True)
                hashlib.sha256(shot).hexdigest()
                return bool(names)
            finally:
                await context.close()

        async def drain(count: int) -> int:
            remaining = count
            ok = 0

            async def task() -> None:
                nonlocal remaining, ok
                while remaining > 0:
                    remaining -= 1
                    succeeded = await one()
                    ok += succeeded
                    if on_job is not None:
                        on_job()

            await asyncio.gather(*(task() for _ in range(concurrency)))
            return ok

        await drain(warmup)
        start = time.perf_counter()
        ok = await drain(jobs)
        elapsed = time.perf_counter() - start
        await browser.close()
    finally:
        await pw.stop()
        if proxy is not None:
            await proxy.close()
    return ok, elapsed


# --- CPU of a browser's processes -----------------------------------------------------------
def browser_cpu_s(root: psutil.Process) -> dict[str, float]:
    """CPU seconds (user + system) so far of ``root``'s descendants, by part: ``driver``
    (Playwright's node) and ``Chromium`` (the rest). Each process also counts what the
    children it reaped used: every job's renderer exits with its context (read live only,
    most of Chromium's CPU was missed), and a browser the worker recycles stays counted in
    the driver that reaped it, so the sum does not fall when it exits."""
    parts = {"driver": 0.0, "Chromium": 0.0}
    try:
        descendants = root.children(recursive=True)
    except psutil.Error:
        return parts
    for process in descendants:
        try:
            times = process.cpu_times()
            name = process.name()
        except psutil.Error:
            continue
        parts["driver" if name.startswith("node") else "Chromium"] += times.user + times.system
        parts["Chromium"] += times.children_user + times.children_system
    return parts


# --- memory ---------------------------------------------------------------------------------
def _rollup(pid: int) -> dict[str, int]:
    """/proc/PID/smaps_rollup in bytes (Pss, Pss_Anon, Pss_File, Pss_Shmem, ...)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        lines = f.read().splitlines()[1:]
    out = {}
    for line in lines:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            out[name] = int(parts[0]) * 1024
    return out


@dataclass
class Sample:
    at: float
    # part -> (PSS, anonymous + shmem PSS) in bytes; parts: python, driver, chromium
    parts: dict[str, tuple[int, int]]
    processes: int

    def total(self, anon: bool = False) -> int:
        return sum(p[1] if anon else p[0] for p in self.parts.values())


def tree_sample(root_pid: int, skip: Callable[[list[str]], bool] | None = None) -> Sample:
    """PSS of a process and all its descendants, split into python / driver / chromium.

    PSS divides each shared page among the processes that map it, so summing it over the
    tree counts every page once (summed RSS counts Chromium's shared pages once per
    process). File-backed pages are also shared with processes outside the tree (another
    Chromium on the machine lowers ours), which is why the anonymous part is reported too.
    """
    parts: dict[str, tuple[int, int]] = {}
    count = 0
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return Sample(time.monotonic(), parts, 0)
    for proc in procs:
        try:
            cmdline = proc.cmdline()
            if skip is not None and skip(cmdline):
                continue
            name = proc.name().lower()
            roll = _rollup(proc.pid)
        except (psutil.Error, OSError):
            continue
        if proc.pid == root_pid:
            part = "python"
        elif "node" in name:
            part = "driver"
        elif "chrom" in name or "headless" in name:
            part = "chromium"
        else:
            part = "other"
        pss, anon = parts.get(part, (0, 0))
        parts[part] = (
            pss + roll.get("Pss", 0),
            anon + roll.get("Pss_Anon", 0) + roll.get("Pss_Shmem", 0),
        )
        count += 1
    return Sample(time.monotonic(), parts, count)


@dataclass
class MemoryRun:
    label: str
    jobs: int
    seconds: float = 0.0
    succeeded: int = 0
    samples: list[Sample] = field(default_factory=list)

    def _window(self, lo: float, hi: float) -> list[Sample]:
        if not self.samples:
            return []
        t0, t1 = self.samples[0].at, self.samples[-1].at
        span = max(t1 - t0, 1e-9)
        chosen = [s for s in self.samples if lo <= (s.at - t0) / span <= hi]
        return chosen or self.samples[-1:]

    def steady(self, part: str | None = None, anon: bool = False) -> float:
        """Median over the second half of the run, MB."""
        return self._median(self._window(0.5, 1.0), part, anon)

    def peak(self, part: str | None = None, anon: bool = False) -> float:
        return max(self._value(s, part, anon) for s in self.samples) / MB if self.samples else 0

    def start_level(self, anon: bool = False, part: str | None = None) -> float:
        """Median of 10-30 % of the run (after the first jobs warmed everything), MB."""
        return self._median(self._window(0.1, 0.3), part, anon)

    def end_level(self, anon: bool = False, part: str | None = None) -> float:
        """Median of the last 20 % of the run, MB."""
        return self._median(self._window(0.8, 1.0), part, anon)

    def growth_percent(self, anon: bool = False, part: str | None = None) -> float:
        start = self.start_level(anon, part)
        return (self.end_level(anon, part) / start - 1) * 100 if start else 0.0

    @staticmethod
    def _value(sample: Sample, part: str | None, anon: bool) -> int:
        if part is None:
            return sample.total(anon)
        pss, private = sample.parts.get(part, (0, 0))
        return private if anon else pss

    def _median(self, samples: list[Sample], part: str | None, anon: bool) -> float:
        if not samples:
            return 0.0
        return statistics.median(self._value(s, part, anon) for s in samples) / MB


@contextmanager
def sampling(
    run: MemoryRun,
    pid: int,
    interval_s: float = 0.5,
    skip: Callable[[list[str]], bool] | None = None,
) -> Iterator[None]:
    """Sample the tree of ``pid`` into ``run.samples`` while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            sample = tree_sample(pid, skip)
            if sample.processes:
                run.samples.append(sample)
            stop.wait(interval_s)

    thread = threading.Thread(target=loop, name="pss-sampler", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def python_env() -> dict[str, str]:
    """Environment for a child Python that imports this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).strip(
        os.pathsep
    )
    return env


def python() -> str:
    return sys.executable


def wait_all(
    client: PagefleetClient, ids: list[str], timeout: float = 900, poll: float = 0.2
) -> list[Job]:
    """The jobs ``ids`` (in that order) once every one is final, polling every ``poll`` s."""
    deadline = time.monotonic() + timeout
    pending, done = list(ids), {}
    while pending:
        for job_id in list(pending):
            got = client.get(job_id)
            if got.is_final:
                done[job_id] = got
                pending.remove(job_id)
        if pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} jobs still not final")
            time.sleep(poll)
    return [done[i] for i in ids]


# As many as an admin may set: a bench's burst is never refused for its rate.
BENCH_SUBMISSION_RATE = 100_000


def lift_submission_rate(stack: LocalStack) -> None:
    """Let the stack's dev tenant submit a bench's rounds in one burst of any size.

    A bench submits each round's jobs at once and measures what they cost to run; the
    tenant's default rate (120 a minute, bursts of 120) would refuse a round past the burst
    with a 429 mid-run. The limit is set as an operator sets it (``PATCH
    /v1/admin/tenants/{t}/limits``); every submission still passes the same admission
    write, so nothing measured changes."""
    from devstack.stack import DEV_TENANT

    key = stack.create_tenant_key(DEV_TENANT, name="bench-admin", admin=True)
    with stack.client(key) as admin:
        admin.set_limits(
            DEV_TENANT, submits_per_minute=BENCH_SUBMISSION_RATE, burst=BENCH_SUBMISSION_RATE
        )
