"""A browser killed (SIGKILL) under a job with a 1 s ``job_timeout_s`` whose page hangs: the
job ends as the lifecycle says and its slot is free at once; nothing waits out a bound on
the dead browser (moto server, real Chromium, pages on 127.0.0.1).

Once killed, a call still in flight may never be answered: a page being made as its
browser was killed was not, until the 20 s bound on opening a context ran out (seen on
this machine by killing the browser 0.02 to 0.2 s into opening a context: from 0.12 s on,
``new_page`` hung). That window is a race with Chromium, so the sabotage here makes it
certain: it kills the real browser and leaves the call it interrupted unanswered, as
Playwright did. A bound that ran out on a browser shows as its retirement for
``unresponsive`` (``BrowserPool.recycles``, ``BrowserGeneration.retire_reason``); a dead
browser must never be retired so: it is gone, not slow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.async_api import BrowserContext

from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import submit, wait_for_job
from tests.worker.test_browser_lifecycle import HangingSite, held_ms, no_dns

pytestmark = pytest.mark.e2e


@pytest.fixture
def hanging_site() -> Iterator[HangingSite]:
    site = HangingSite("dead-browser-site")
    try:
        yield site
    finally:
        site.stop()


class Saboteur:
    """Kills a context's browser (SIGKILL to its process) as the context is asked to make its
    page or to close, once per arming, and leaves that call unanswered."""

    def __init__(self, worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self._pool = worker.browsers
        self._armed: set[str] = set()
        self.killed: list[Any] = []  # the generations killed
        for name in ("new_page", "close"):
            monkeypatch.setattr(BrowserContext, name, self._sabotaged(name))

    def arm(self, call: str) -> None:
        self._armed.add(call)

    def _sabotaged(self, name: str) -> Any:
        real = getattr(BrowserContext, name)
        saboteur = self

        async def call(context: BrowserContext, *args: Any, **kwargs: Any) -> Any:
            if name not in saboteur._armed:
                return await real(context, *args, **kwargs)
            saboteur._armed.discard(name)
            saboteur.kill(context.browser)
            await asyncio.Future()  # never answered, as Playwright left such a call

        return call

    def kill(self, browser: Any) -> None:
        """``browser``'s, or (None) the current one's."""
        found = (
            [g for g in list(self._pool._generations) if g.browser._impl_obj is browser._impl_obj]
            if browser is not None
            else [self._pool._current]
        )
        assert found and found[0] is not None, "no such browser in the pool"
        found[0].process.kill()
        self.killed.append(found[0])


def hang_job(services: Any, site: HangingSite) -> str:
    request = {
        "steps": [{"action": "goto", "url": f"{site.url}/hang"}],
        "options": {"job_timeout_s": 1, "navigation_timeout_ms": 30_000},
        "max_attempts": 1,
    }
    return submit(services, request).job_id


def test_a_browser_killed_under_a_hung_job_is_not_waited_on(
    hanging_site, services, make_settings, run_worker, monkeypatch
):
    # One slot: the plain job after each hung one runs only once the hung one gave it back.
    running = run_worker(make_settings(concurrency=1, heartbeat_seconds=30), resolver=no_dns)
    pool = running.worker.browsers
    saboteur = Saboteur(running.worker, monkeypatch)
    held: dict[str, int] = {}

    def next_job_runs() -> None:
        plain = {"steps": [{"action": "goto", "url": f"{hanging_site.url}/ok"}], "max_attempts": 1}
        done = wait_for_job(services, submit(services, plain).job_id, timeout=120)
        assert done.status is JobStatus.SUCCEEDED, done.error

    # 1. Killed as the job's page is being made: the job runs on a new browser, where its
    # page hangs and its own timeout ends it.
    saboteur.arm("new_page")
    job = hang_job(services, hanging_site)
    done = wait_for_job(services, job, timeout=120)
    assert done.status is JobStatus.TIMED_OUT, done.error
    assert done.error is not None and done.error.kind == "timeout"
    held["killed while opening"] = held_ms(done)
    next_job_runs()

    # 2. Killed while its page hangs, before its timeout: the browser crashed under the step.
    hanging_site.asked.clear()
    job = hang_job(services, hanging_site)
    assert hanging_site.asked.wait(120), "the job never asked for its page"
    saboteur.kill(None)
    done = wait_for_job(services, job, timeout=120)
    assert done.status is JobStatus.FAILED, done.error
    assert done.error is not None and done.error.kind == "browser_crashed"
    assert done.error.step_index == 0
    held["killed while hanging"] = held_ms(done)
    next_job_runs()

    # 3. Timed out first, then killed as the watchdog closes its context: timed out, with
    # what was read of the page while the browser was alive.
    saboteur.arm("close")
    job = hang_job(services, hanging_site)
    done = wait_for_job(services, job, timeout=120)
    assert done.status is JobStatus.TIMED_OUT, done.error
    assert done.error is not None and done.error.kind == "timeout"
    assert {"failure.png", "failure.html"} <= {a.name for a in done.artifacts}
    held["killed while closing"] = held_ms(done)
    next_job_runs()

    print(f"\nslot held by each hung job (ms, job_timeout_s 1): {held}")
    assert len(saboteur.killed) == 3
    # Nothing waited out a bound on a dead browser (that is what made it "unresponsive").
    assert [g.retire_reason for g in saboteur.killed] == [None, None, None]
    assert pool.recycles.get("unresponsive", 0) == 0
    assert all(g.crashed for g in saboteur.killed)
