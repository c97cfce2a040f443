"""The context a worker makes ahead while it runs no job (browser_task.browser.spare): the next
job that would open that very context runs in it, set up as its own; nothing of an earlier
job is in it; a busy worker makes none; the worker never holds more contexts than slots; a
spare on a browser that went is never given out."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page

from browser_task.browser.generation import JobBrowser
from browser_task.browser.pool import BrowserPool
from pagefleet.jobs.options import JobOptions, Viewport
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.settings import WorkerSettings
from tests.worker.conftest import TENANT, Site, submit, wait_for_job

COOKIE_PAGE = """<title>c</title><p id=c>?</p>
<script>
  document.getElementById("c").textContent =
    (document.cookie || "none") + "/" + (localStorage.getItem("seen") || "none");
  document.cookie = "seen=1; path=/";
  localStorage.setItem("seen", "1");
</script>"""


def _settings(**overrides: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "jobs_table": "t",
        "tenants_table": "t",
        "artifacts_bucket": "b",
        "queue_urls": {},
        "allow_loopback": True,
        **overrides,
    }
    return WorkerSettings(**values)


def _with_pool(body: Callable[[BrowserPool], Awaitable[Any]], **overrides: Any) -> Any:
    async def go() -> Any:
        pool = BrowserPool(_settings(**overrides))
        await pool.start()
        try:
            return await body(pool)
        finally:
            await pool.close()

    return asyncio.run(go())


class Noted:
    """A context setup that notes the contexts it was applied to, as the scheme watch is."""

    def __init__(self) -> None:
        self.pages: list[list[Page]] = []

    async def __call__(self, context: BrowserContext) -> None:
        self.pages.append(list(context.pages))
        context.on("request", lambda _request: None)


def test_an_idle_worker_makes_a_context_ahead_and_the_next_job_runs_in_it_set_up() -> None:
    async def body(pool: BrowserPool) -> None:
        assert await pool.spare.ready()
        setup = Noted()
        session = await pool.new_session(JobOptions(), setup=setup)
        assert pool.spare.taken == 1
        # Its setup was applied once, to the context made ahead, its page already there...
        assert pool.spare.made == 1
        assert setup.pages == [[session.page]]
        assert [name for name, _ in session.listeners] == ["request", "page:crash"]
        # ... whose page has made no request yet and is the only one.
        assert session.page.url == "about:blank"
        assert session.context.pages == [session.page]
        await session.close()

    _with_pool(body)


def test_a_busy_worker_makes_none_and_an_idle_one_makes_the_next() -> None:
    async def body(pool: BrowserPool) -> None:
        assert await pool.spare.ready()
        first = await pool.new_session(JobOptions())
        second = await pool.new_session(JobOptions())  # none left: its own
        assert (pool.spare.taken, pool.spare.made) == (1, 1)
        await first.close()
        # One job still runs: nothing is made beside it.
        assert not await pool.spare.ready()
        await second.close()
        assert await pool.spare.ready()
        assert pool.spare.made == 2

    _with_pool(body, concurrency=2)


def test_a_job_with_its_own_context_options_opens_its_own_and_slots_bound_the_contexts() -> None:
    async def body(pool: BrowserPool) -> tuple[int, bool, int]:
        assert await pool.spare.ready()
        wide = JobOptions(viewport=Viewport(width=800, height=600))
        session = await pool.new_session(wide)
        width = await session.page.evaluate("window.innerWidth")
        held = await pool.spare.ready()
        contexts = len(session.generation.browser.contexts)
        await session.close()
        assert pool.spare.taken == 0
        return width, held, contexts

    # One slot: the spare is closed as the job takes the slot (one context, not two).
    assert _with_pool(body, concurrency=1) == (800, False, 1)
    # Two slots: the spare stays for the next job (two contexts: the job's and the spare).
    assert _with_pool(body, concurrency=2) == (800, True, 2)


def test_nothing_of_a_job_reaches_the_next_through_the_context_made_ahead(site: Site) -> None:
    url = site.add("/cookie", COOKIE_PAGE)

    async def body(pool: BrowserPool) -> list[str]:
        seen = []
        for _ in range(3):
            assert await pool.spare.ready()
            session = await pool.new_session(JobOptions())
            await session.page.goto(url)
            seen.append(await session.page.text_content("#c") or "")
            await session.close()
        assert pool.spare.taken == 3
        return seen

    assert _with_pool(body) == ["none/none"] * 3


def test_spare_context_off_makes_none() -> None:
    async def body(pool: BrowserPool) -> None:
        assert not await pool.spare.ready()
        session = await pool.new_session(JobOptions())
        await session.close()
        assert not await pool.spare.ready()
        assert pool.spare.made == 0

    _with_pool(body, spare_context=False)


def test_a_spare_on_a_browser_that_died_is_never_given_out() -> None:
    async def body(pool: BrowserPool) -> tuple[str, int]:
        assert await pool.spare.ready()
        dead = pool._current
        assert dead is not None and dead.process is not None
        os.kill(dead.process.pid, signal.SIGKILL)
        await asyncio.wait_for(dead.gone.wait(), 10)
        session: JobBrowser = await pool.new_session(JobOptions())
        assert session.generation is not dead
        title = await session.page.evaluate("document.readyState")
        await session.close()
        return title, pool.spare.taken

    assert _with_pool(body) == ("complete", 0)


@pytest.mark.parametrize("isolation", ["job", "tenant"])
def test_jobs_in_a_row_each_see_a_fresh_context(
    run_worker, services, make_settings, site, isolation: str
) -> None:
    """On the worker: consecutive jobs take contexts made ahead, and none sees the last
    one's cookie (a warm-context job's first run takes the spare too, then its own)."""
    url = site.add("/cookie", COOKIE_PAGE)
    running = run_worker(make_settings(concurrency=1))
    body = {
        "steps": [
            {"action": "goto", "url": url},
            {"action": "extract", "name": "seen", "selector": "#c"},
        ],
        "options": {"isolation": "job"},
    }
    for _ in range(2):
        job = wait_for_job(services, submit(services, body).job_id)
        assert job.status is JobStatus.SUCCEEDED, job.error
        assert job.result == {"seen": "none/none"}
    if isolation == "tenant":
        warm = {**body, "options": {"isolation": "tenant"}}
        first = wait_for_job(services, submit(services, warm).job_id)
        again = wait_for_job(services, submit(services, warm).job_id)
        assert first.result == {"seen": "none/none"}
        assert again.result == {"seen": "seen=1/1"}  # its own warm context, kept for it
    assert running.worker.browsers.spare.taken >= 2


def test_a_spare_whose_page_crashed_while_it_waited_is_never_given_out() -> None:
    async def body(pool: BrowserPool) -> tuple[str, int, int]:
        assert await pool.spare.ready()
        making = pool.spare._making
        assert making is not None
        spare = making.result()
        assert spare is not None
        cdp = await spare.context.new_cdp_session(spare.page)
        with contextlib.suppress(Exception):  # the renderer dies before it answers
            await asyncio.wait_for(cdp.send("Page.crash"), 5)
        for _ in range(100):
            if spare.crashed:
                break
            await asyncio.sleep(0.05)
        session = await pool.new_session(JobOptions())
        assert session.page is not spare.page
        state = await session.page.evaluate("document.readyState")
        await session.close()
        return state, pool.spare.taken, pool.spare.dropped

    assert _with_pool(body) == ("complete", 0, 1)


def test_two_jobs_opening_at_once_never_share_the_spare() -> None:
    async def body(pool: BrowserPool) -> None:
        await pool.spare.ready()
        session = await pool.new_session(JobOptions())
        await session.close()  # the worker runs no job: the next spare is being made now
        first, second = await asyncio.gather(
            pool.new_session(JobOptions()), pool.new_session(JobOptions())
        )
        assert first.context is not second.context
        assert first.page is not second.page
        assert pool.spare.taken == 2  # the one at start, then one of the two
        await asyncio.gather(first.close(), second.close())

    _with_pool(body, concurrency=2)


def test_a_draining_worker_makes_no_context_ahead(run_worker, services, make_settings, site):
    """A job that ends while its worker drains leaves no spare behind it: one would only be
    made to be closed at the stop (and the stop would wait for it)."""
    url = site.add("/slow", "<title>s</title>")
    running = run_worker(make_settings(concurrency=1, drain_seconds=30))
    spare = running.worker.browsers.spare
    deadline = time.monotonic() + 30
    while spare.made < 1:  # the one made at start
        assert time.monotonic() < deadline, "no context made at start"
        time.sleep(0.02)
    body = {"steps": [{"action": "goto", "url": url}, {"action": "sleep", "ms": 4000}]}
    job = submit(services, body)
    deadline = time.monotonic() + 30
    while services.store.get(TENANT, job.job_id).status is not JobStatus.RUNNING:
        assert time.monotonic() < deadline, "the job never ran"
        time.sleep(0.02)
    running.stop()
    assert wait_for_job(services, job.job_id).status is JobStatus.SUCCEEDED
    assert spare.made == 1


def test_a_worker_that_stops_while_its_spare_is_being_made_closes_it() -> None:
    """The stop waits for the context being made and closes it (one cancelled half way would
    still be made in the browser, and nothing would close it)."""
    contexts: list[int] = []

    async def body(pool: BrowserPool) -> None:
        assert pool.spare.held  # being made since the start
        browser = pool._current
        assert browser is not None
        original = pool.spare.drop

        async def drop() -> None:
            await original()
            contexts.append(len(browser.browser.contexts))

        pool.spare.drop = drop  # type: ignore[method-assign]

    _with_pool(body)
    assert contexts == [0]
