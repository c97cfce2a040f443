"""One long-lived Chromium per worker, a fresh BrowserContext per job.

The browser is launched at start (before polling) and kept warm, with all its traffic sent
through the worker's egress proxy (``browser_task.egress.proxy``). It is replaced:
- after a crash (``disconnected``): the next job launches a new one; what is left of the
  dead browser's process tree is killed;
- after ``max_jobs_per_browser`` jobs (after each job in a pool whose isolation is "task":
  a fresh browser per job), when the RSS of its process tree passes
  ``max_browser_rss_mb``, or when it stops answering (a context that will not open or
  close): new jobs go to a new browser while jobs still running on the old one finish
  there; the old one closes when its last context closes.

Closing a browser is ``browser.close()`` bounded by a timeout, then a kill of whatever is
left of its process tree. Only processes found as descendants of this worker (identified by
a marker switch on the browser's command line) are ever signalled. Every wait on a browser
also ends as soon as it is gone (``BrowserGeneration.within``): a dead browser is reaped,
never waited on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

from playwright.async_api import BrowserContext, Page, Playwright, async_playwright

from browser_task.browser.chromium import driver_env, environment, launch
from browser_task.browser.contexts import open_context
from browser_task.browser.generation import (
    CONTEXT_CLOSE_TIMEOUT_S,
    BrowserGeneration,
    JobBrowser,
    RelaunchBrowser,
)
from browser_task.browser.har import har_file
from browser_task.browser.process_tree import (
    find_browser_process,
    kill_tree,
    remember_tree,
    watch_exit,
)
from browser_task.browser.setup import ContextSetup
from browser_task.browser.spare import SPARE_OPTIONS, SpareContext, fits
from browser_task.browser.video import recording_dir
from browser_task.browser.warm import RecordingContext, WarmContexts
from browser_task.egress.guard import EgressPolicy, Resolver
from browser_task.egress.proxy import Connector, Decision, EgressProxy, UpstreamProxy, open_tcp
from pagefleet.jobs.options import JobOptions
from pagefleet.specs.settings import WorkerSettings

log = logging.getLogger("pagefleet.browser")

CONTEXT_OPEN_TIMEOUT_S = 20.0
BROWSER_CLOSE_TIMEOUT_S = 10.0
# Summing RSS over ~10 processes costs a millisecond or two: at most this often.
MEMORY_CHECK_INTERVAL_S = 2.0


class BrowserPool:
    def __init__(
        self,
        settings: WorkerSettings,
        *,
        on_crash: Callable[[], None] | None = None,
        resolver: Resolver | None = None,
        policy: EgressPolicy | None = None,
        connect: Connector = open_tcp,
        on_refusal: Callable[[Decision], None] | None = None,
    ) -> None:
        self._settings = settings
        self._on_crash = on_crash
        self._playwright: Playwright | None = None
        self._current: BrowserGeneration | None = None
        self._generations: set[BrowserGeneration] = set()
        self._launch_lock = asyncio.Lock()
        self._launched = 0
        self._reapers: set[asyncio.Task[None]] = set()
        self.recycles: dict[str, int] = {}
        self.warm = WarmContexts(settings.concurrency)
        # A browser per job (isolation "task"): none to make a spare in.
        self.spare = SpareContext(settings.spare_context and settings.jobs_per_browser > 1)
        self._resolver = resolver
        self._connect = connect
        pool_proxy = settings.egress_proxy
        self.egress = EgressProxy(
            policy or EgressPolicy(allow_loopback=settings.allow_loopback),
            resolver,
            connect=connect,
            # A pool whose egress is a proxy: every checked target is tunnelled through it.
            upstream=None if pool_proxy is None else UpstreamProxy.of_pool(pool_proxy),
            on_refusal=on_refusal,  # the worker's egress log: a refusal put down to its job
        )

    async def job_egress(
        self, upstream: UpstreamProxy, on_refusal: Callable[[Decision], None] | None = None
    ) -> EgressProxy:
        """A started egress listener for one job that chains to the job's own proxy.

        Same policy as the worker's: targets are checked here and the upstream is told the
        checked address; the upstream's own address is checked first (raises ``Refused``).
        """
        proxy = EgressProxy(
            self.egress.policy,
            self._resolver,
            connect=self._connect,
            upstream=upstream,
            on_refusal=on_refusal,
        )
        await proxy.check_upstream()
        await proxy.start()
        return proxy

    async def start(self) -> None:
        await self.egress.check_upstream()  # a pool proxy the policy refuses stops the start
        await self.egress.start()
        with environment(driver_env()):
            self._playwright = await async_playwright().start()
        await self._browser()
        self._make_spare()

    @property
    def launches(self) -> int:
        return self._launched

    async def _launch(self) -> BrowserGeneration:
        assert self._playwright is not None, "BrowserPool.start() first"
        browser, marker = await launch(self._playwright, self._settings, self.egress.url)
        self._launched += 1
        generation = BrowserGeneration(
            browser=browser, number=self._launched, process=find_browser_process(marker)
        )
        remember_tree(generation)
        browser.on("disconnected", lambda _b: self._on_disconnected(generation))
        # The process's exit may be known before Playwright's disconnected.
        generation.unwatch = watch_exit(
            generation.process, lambda: self._on_disconnected(generation)
        )
        self._generations.add(generation)
        return generation

    def _on_disconnected(self, generation: BrowserGeneration) -> None:
        if generation.gone.is_set():
            return  # told twice: by its process's exit and by Playwright
        # Whatever still waits on this browser stops waiting (BrowserGeneration.within).
        generation.gone.set()
        if not generation.closing:
            generation.crashed = True
            if self._on_crash is not None:
                self._on_crash()
            # Renderers and helpers of a dead browser may outlive it: kill what is left.
            task = asyncio.get_running_loop().create_task(self._reap(generation))
            self._reapers.add(task)
            task.add_done_callback(self._reapers.discard)
        if self._current is generation:
            self._current = None
        self._generations.discard(generation)

    async def _browser(self) -> BrowserGeneration:
        current = self._current
        if current is not None and not current.crashed and not current.retired:
            return current
        async with self._launch_lock:
            current = self._current
            if current is not None and not current.crashed and not current.retired:
                return current
            self._current = await self._launch()
            return self._current

    def _retire(self, generation: BrowserGeneration, reason: str) -> None:
        """No new jobs on this browser; it closes once its running jobs are done."""
        if generation.retired:
            return
        generation.retired = True
        generation.retire_reason = reason
        self.recycles[reason] = self.recycles.get(reason, 0) + 1
        if self._current is generation:
            self._current = None

    async def new_session(
        self,
        options: JobOptions,
        storage_state: dict[str, Any] | None = None,
        setup: ContextSetup | None = None,
        egress: EgressProxy | None = None,
        warm_key: str | None = None,
    ) -> JobBrowser:
        """A fresh context and page; ``setup`` is applied before the page's first request
        (beside opening the page, or before it for one that routes: see
        browser_task.browser.setup). ``egress`` (see ``job_egress``) becomes the context's
        proxy and is closed with the session. With ``warm_key`` (a job that allows it, see
        browser_task.browser.warm) a parked context of that key is used if any."""
        await self._check_memory()
        if warm_key is not None and egress is None and storage_state is None:
            reused = await self._reuse(warm_key, options, setup)
            if reused is not None:
                return reused
        if fits(options, storage_state=storage_state, egress=egress, setup=setup):
            made = await self.spare.take(self._usable)
            if made is not None:
                adopted = await self._adopt(
                    made.context, made.page, made.generation, options, setup, warm_key=warm_key
                )
                if adopted is not None:
                    return adopted
        elif self._running() + 1 >= self._settings.concurrency:
            await self.spare.drop()  # never more contexts than slots (browser_task.browser.spare)
        if egress is not None or storage_state is not None:
            warm_key = None  # only a context nothing of one job's own went into is kept
        try:
            try:
                return await self._new_session(options, storage_state, setup, egress, warm_key)
            except RelaunchBrowser:
                # Its browser died while the context was being made: once more, on a new one.
                return await self._new_session(options, storage_state, setup, egress, warm_key)
        except BaseException:
            if egress is not None:
                await egress.close()
            raise

    async def _new_session(
        self,
        options: JobOptions,
        storage_state: dict[str, Any] | None = None,
        setup: ContextSetup | None = None,
        egress: EgressProxy | None = None,
        warm_key: str | None = None,
    ) -> JobBrowser:
        generation = await self._browser()
        generation.jobs_started += 1
        generation.active += 1
        if generation.jobs_started >= self._settings.jobs_per_browser:
            # This is the last job for this browser; the next one launches a fresh browser.
            self._retire(generation, "jobs")
        listeners: list[tuple[str, Callable[..., Any]]] = []
        video_dir = recording_dir() if options.video else None
        har_path = har_file() if options.har else None
        try:
            context, page = await generation.within(
                open_context(
                    generation,
                    options,
                    storage_state,
                    setup,
                    egress,
                    listeners,
                    video_dir,
                    har_path,
                ),
                CONTEXT_OPEN_TIMEOUT_S,
            )
        except TimeoutError:
            # The browser no longer answers. Retire it rather than kill it: a job running
            # in the other slot may still finish there.
            self._retire(generation, "unresponsive")
            generation.active -= 1
            await self._maybe_close(generation)
            _remove(video_dir, har_path)
            raise
        except BaseException as failed:
            generation.active -= 1
            await self._maybe_close(generation)
            _remove(video_dir, har_path)
            if isinstance(failed, Exception) and generation.dead():
                # Maybe dead before its disconnected event (or its process's exit) reached us.
                self._on_disconnected(generation)
                raise RelaunchBrowser(f"browser {generation.number} died") from failed
            raise
        session = JobBrowser(
            context=context,
            page=page,
            generation=generation,
            _release=self._release,
            egress=egress,
            listeners=listeners,
            video_dir=video_dir,
            har_path=har_path,
            warm_key=warm_key,
            _park=self._park if warm_key is not None else None,
        )
        session.watch_crash()
        return session

    def _usable(self, generation: BrowserGeneration) -> bool:
        return (
            generation is self._current
            and not generation.retired
            and not generation.crashed
            and generation.browser.is_connected()
        )

    async def _reuse(
        self, key: str, options: JobOptions, setup: ContextSetup | None
    ) -> JobBrowser | None:
        """A parked warm context of ``key``, set up for this job; None if there is none."""
        await self.warm.expire()
        parked = self.warm.take(key, self._usable)
        if parked is None:
            return None
        return await self._adopt(
            parked.context,
            parked.page,
            parked.generation,
            options,
            setup,
            warm_key=key,
            jobs=parked.jobs + 1,
        )

    async def _adopt(
        self,
        context: BrowserContext,
        page: Page,
        generation: BrowserGeneration,
        options: JobOptions,
        setup: ContextSetup | None,
        warm_key: str | None = None,
        jobs: int = 1,
    ) -> JobBrowser | None:
        """A job's session in a context made before it (warm, or the spare), set up for
        it; None (and closed) if the setup fails."""
        generation.jobs_started += 1
        generation.active += 1
        if generation.jobs_started >= self._settings.jobs_per_browser:
            self._retire(generation, "jobs")
        session = JobBrowser(
            context=context,
            page=page,
            generation=generation,
            _release=self._release,
            warm_key=warm_key,
            jobs=jobs,
            _park=self._park if warm_key is not None else None,
        )
        try:
            context.set_default_timeout(options.action_timeout_ms)
            context.set_default_navigation_timeout(options.navigation_timeout_ms)
            if setup is not None:
                await setup(RecordingContext(context, session.listeners))  # type: ignore[arg-type]
        except Exception:
            await session.close()
            return None
        session.watch_crash()
        return session

    async def _park(self, session: JobBrowser) -> bool:
        """Keep a succeeded job's context warm for the next job of its key."""
        if session.crashed or not self._usable(session.generation) or session.warm_key is None:
            with contextlib.suppress(Exception):
                await session.generation.within(session.context.close(), CONTEXT_CLOSE_TIMEOUT_S)
            return False
        return await self.warm.park(
            session.warm_key,
            session.context,
            session.page,
            session.generation,
            session.jobs,
            session.listeners,
        )

    async def _check_memory(self) -> None:
        """Retire the current browser when its process tree's RSS passes the limit."""
        generation = self._current
        if generation is None or generation.process is None:
            return
        now = time.monotonic()
        if now - generation.memory_checked_at < MEMORY_CHECK_INTERVAL_S:
            return
        generation.memory_checked_at = now
        rss = await asyncio.to_thread(remember_tree, generation)
        limit = self._settings.max_browser_rss_mb * 1024 * 1024
        if rss > limit and not generation.retired:
            log.info(
                "recycling the browser: memory",
                extra={"rss_mb": rss // (1024 * 1024), "limit_mb": limit // (1024 * 1024)},
            )
            self._retire(generation, "memory")
            await self._maybe_close(generation)

    async def _release(self, session: JobBrowser) -> None:
        if session.wedged:
            self._retire(session.generation, "unresponsive")
        session.generation.active -= 1
        await self._maybe_close(session.generation)
        self._make_spare()

    def _running(self) -> int:
        return sum(generation.active for generation in self._generations)

    def _make_spare(self) -> None:
        """Make a context ahead for the next job, when no job runs (browser_task.browser.spare)."""
        generation = self._current
        if generation is None or not self._usable(generation) or self._running() > 0:
            return
        self.spare.make(
            generation,
            lambda: generation.within(
                open_context(generation, SPARE_OPTIONS), CONTEXT_OPEN_TIMEOUT_S
            ),
        )

    async def _maybe_close(self, generation: BrowserGeneration) -> None:
        if generation.retired and generation.active <= 0 and not generation.closing:
            await self._close_generation(generation)

    async def _close_generation(self, generation: BrowserGeneration) -> None:
        generation.closing = True
        self._generations.discard(generation)
        await self.warm.drop_generation(generation)
        await self.spare.drop_generation(generation)
        # A browser already gone is not closed, only reaped (``within`` does not start it).
        with contextlib.suppress(Exception):
            await generation.within(generation.browser.close(), BROWSER_CLOSE_TIMEOUT_S)
        await self._reap(generation)

    async def _reap(self, generation: BrowserGeneration) -> None:
        """Kill and wait for whatever is left of this browser's process tree."""
        await asyncio.to_thread(kill_tree, generation)
        generation.unwatch()

    async def close(self) -> None:
        self.spare.stop()
        await self.spare.drop()
        await self.warm.close_all()
        # Each bounded on its own: closed side by side, not one after the other.
        await asyncio.gather(*(self._close_generation(g) for g in list(self._generations)))
        self._current = None
        if self._reapers:
            await asyncio.wait(self._reapers, timeout=10)
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        await self.egress.close()


def _remove(directory: str | None, har_path: str | None) -> None:
    for path in (directory, os.path.dirname(har_path) if har_path else None):
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
