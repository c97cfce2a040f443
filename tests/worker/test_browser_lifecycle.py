"""Browser lifecycle under load: 40 jobs with renderer crashes, browser crashes, hung pages
and recycling, and not one Chromium process left behind.

The test process makes itself a child subreaper for the duration, so a Chromium helper
orphaned by a crash is re-parented to us (not to init) and still counts as ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import http.server
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pytest

from devstack.loopback import serve_on_loopback
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import submit, wait_for_job

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

PR_SET_CHILD_SUBREAPER = 36


async def no_dns(host: str) -> list[str]:
    """The worker's resolver here: pages are on 127.0.0.1 literals, nothing else resolves."""
    raise OSError(-2, "no DNS in this test")


def chromium_descendants() -> list[psutil.Process]:
    found = []
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "chrom" in proc.name().lower() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def reap_orphaned_zombies() -> int:
    """Zombies re-parented to us (the subreaper) are ours to collect."""
    reaped = 0
    for proc in psutil.Process(os.getpid()).children():
        with contextlib.suppress(psutil.Error, ChildProcessError):
            if proc.status() == psutil.STATUS_ZOMBIE and "chrom" in proc.name().lower():
                os.waitpid(proc.pid, os.WNOHANG)
                reaped += 1
    return reaped


@pytest.fixture
def subreaper() -> Iterator[None]:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) unavailable")
    try:
        yield
    finally:
        reap_orphaned_zombies()
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class HangingSite:
    """Small pages on 127.0.0.1 (each shows its path), plus ``/hang``, which never answers
    (until the site stops) and says when it was asked (``asked``)."""

    def __init__(self, name: str) -> None:
        self.asked = threading.Event()
        self._stop = threading.Event()
        asked, stop = self.asked, self._stop

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/hang"):
                    asked.set()
                    stop.wait(60)
                    return
                body = b"<title>t</title><h1 id=h>ok</h1><p id=p>" + self.path.encode() + b"</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = serve_on_loopback(Handler, name)
        self.url = self._server.url

    def stop(self) -> None:
        self._stop.set()
        self._server.stop()


@pytest.fixture
def slow_site() -> Iterator[str]:
    site = HangingSite("lifecycle-site")
    try:
        yield site.url
    finally:
        site.stop()


class RendererCrasher:
    """Crashes (CDP ``Page.crash``) every page whose URL holds ``crashme``, from before the
    first job is submitted, so a crash job can never finish uncaught on a slow machine."""

    def __init__(self, worker: Any) -> None:
        self._worker = worker
        self.crashed: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="crasher", daemon=True)

    def __enter__(self) -> RendererCrasher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    async def _crash_marked_pages(self) -> None:
        for generation in list(self._worker.browsers._generations):
            for context in list(generation.browser.contexts):
                for page in list(context.pages):
                    marker = page.url.rsplit("/", 1)[-1]
                    if not marker.startswith("crashme-") or marker in self.crashed:
                        continue
                    # Only this job's renderer dies; the browser and other jobs carry on.
                    with contextlib.suppress(Exception):
                        cdp = await context.new_cdp_session(page)
                        await asyncio.wait_for(cdp.send("Page.crash"), 2)
                    self.crashed.add(marker)

    def _watch(self) -> None:
        while not self._stop.is_set():
            future = asyncio.run_coroutine_threadsafe(
                self._crash_marked_pages(), self._worker._loop
            )
            with contextlib.suppress(Exception):
                future.result(10)
            self._stop.wait(0.05)


def kill_browser(worker: Any) -> None:
    """SIGKILL the current browser's main process (a whole-browser crash)."""
    generation = worker.browsers._current
    if generation is not None and generation.process is not None:
        with contextlib.suppress(psutil.Error):
            generation.process.kill()


def held_ms(job: JobRecord) -> int:
    """From the claim to the outcome written: how long the job held its slot."""
    assert job.started_at is not None and job.finished_at is not None
    return round((epoch_of_iso(job.finished_at) - epoch_of_iso(job.started_at)) * 1000)


# Each fault as often as in the 200-job run this test was (8 hung pages, 8 renderer
# crashes, 2 browser kills, 5 recycles by job count), between fewer plain jobs: a plain job
# costs ~1 s of CPU and proves nothing the first few do not. In every five jobs: a hung
# page, a renderer crash and three plain jobs, so each fault still meets jobs in flight.
JOBS = 40
JOBS_PER_BROWSER = JOBS // 5


def test_jobs_with_crashes_hangs_and_recycles_leave_no_chromium_behind(
    subreaper, slow_site, services, make_settings, run_worker
):
    before = chromium_descendants()
    settings = make_settings(max_jobs_per_browser=JOBS_PER_BROWSER, heartbeat_seconds=30)
    running = run_worker(settings, resolver=no_dns)
    worker = running.worker
    assert len(chromium_descendants()) > len(before)

    kinds: dict[str, str] = {}
    jobs: list[str] = []
    requests: list[tuple[str, dict[str, Any]]] = []
    crash_markers: list[str] = []
    for n in range(JOBS):
        if n % 5 == 3:  # hung page: the job watchdog ends it
            kind, steps, options = (
                "hang",
                [{"action": "goto", "url": f"{slow_site}/hang/{n}"}],
                {"job_timeout_s": 1, "navigation_timeout_ms": 30_000},
            )
        elif n % 5 == 2:  # renderer crash while waiting on the page
            kind, steps, options = (
                "crash",
                [
                    {"action": "goto", "url": f"{slow_site}/crashme-{n}"},
                    # Long enough that the crasher always gets there first.
                    {"action": "wait_for", "selector": "#never", "timeout_ms": 10_000},
                ],
                {},
            )
            crash_markers.append(f"crashme-{n}")
        else:
            kind, steps, options = (
                "ok",
                [
                    {"action": "goto", "url": f"{slow_site}/p/{n}"},
                    {"action": "extract", "name": "p", "selector": "#p"},
                ],
                {},
            )
        requests.append((kind, {"steps": steps, "options": options, "max_attempts": 1}))

    started = time.monotonic()
    with RendererCrasher(worker) as crasher:
        # Submitting through moto is slow-ish: several at once, while the worker already runs.
        with ThreadPoolExecutor(4) as pool:
            submitted = list(pool.map(lambda r: submit(services, r[1]).job_id, requests))
        for (kind, _request), job_id in zip(requests, submitted, strict=True):
            kinds[job_id] = kind
            jobs.append(job_id)

        # Two whole-browser crashes while jobs run.
        for _ in range(2):
            kill_browser(worker)
            time.sleep(1.0)

        outcomes: dict[str, int] = {}
        killed: list[str] = []  # jobs (not crash jobs) that were running when a kill came
        hang_ms: list[int] = []  # claimed to finished, of each hung job (timeout 1 s)
        longest = (0, "")  # the longest any job held its slot, and its kind
        for job_id in jobs:
            done = wait_for_job(services, job_id, timeout=400)
            if kinds[job_id] == "hang":
                hang_ms.append(held_ms(done))
            longest = max(longest, (held_ms(done), kinds[job_id]))
            if kinds[job_id] != "crash" and done.error and done.error.kind == "browser_crashed":
                killed.append(job_id)
                continue
            key = f"{kinds[job_id]}:{done.status.value}"
            outcomes[key] = outcomes.get(key, 0) + 1
    elapsed = time.monotonic() - started
    running.stop()

    reap_orphaned_zombies()
    deadline = time.monotonic() + 10
    while len(chromium_descendants()) > len(before) and time.monotonic() < deadline:
        time.sleep(0.2)
    after = chromium_descendants()
    print(
        f"\n{JOBS} jobs in {elapsed:.0f}s: {outcomes}; killed with their browser={len(killed)}; "
        f"launches={worker.browsers.launches}; renderers crashed={len(crasher.crashed)}; "
        f"hung jobs held their slot (ms)={hang_ms}; longest held (ms, kind)={longest}"
    )

    # A crash job whose browser was killed first never shows its page: at most the two kills'.
    assert len(crasher.crashed) >= len(crash_markers) - 2, crasher.crashed
    # Two browser kills cost at most the jobs running then (2 slots each), whatever their
    # kind; every other job ends as its kind says.
    assert len(killed) <= 4, killed
    expected = {"hang": "timed_out", "ok": "succeeded", "crash": "failed"}
    for key in outcomes:
        kind, status = key.split(":")
        assert status == expected[kind], outcomes
    assert sum(outcomes.values()) + len(killed) == len(jobs)
    # JOBS / JOBS_PER_BROWSER browsers, plus the two crashes: several launches.
    assert worker.browsers.launches >= 5
    assert [p.pid for p in after] == [p.pid for p in before]


def test_memory_limit_recycles_the_browser(
    subreaper, slow_site, services, make_settings, run_worker
):
    before = chromium_descendants()
    running = run_worker(make_settings(max_browser_rss_mb=100), resolver=no_dns)
    jobs = [
        submit(services, {"steps": [{"action": "goto", "url": f"{slow_site}/m/{n}"}]}).job_id
        for n in range(6)
    ]
    # All six are queued at once: the worker checks the browser's memory as each job opens
    # its page (at most every 2 s), and over 100 MB the first check already retires it.
    for job_id in jobs:
        done = wait_for_job(services, job_id, timeout=60)
        assert done.status is JobStatus.SUCCEEDED, done.error
    pool = running.worker.browsers
    running.stop()
    assert pool.recycles.get("memory", 0) >= 1
    assert pool.launches >= 2
    reap_orphaned_zombies()
    deadline = time.monotonic() + 10
    while len(chromium_descendants()) > len(before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(chromium_descendants()) == len(before)
