"""One long-lived Chromium per worker, a fresh BrowserContext per job.

The browser is launched at start (before polling) and kept warm. It is replaced:
- after a crash (``disconnected``): the next job launches a new one;
- after ``max_jobs_per_browser`` jobs: new jobs go to a new browser while jobs still running
  on the old one finish there; the old one closes when its last context closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright

from pagefleet.models import JobOptions
from pagefleet.settings import WorkerSettings

SYSTEM_CHROMIUM = "/usr/bin/chromium"
CONTEXT_CLOSE_TIMEOUT_S = 5.0
BROWSER_CLOSE_TIMEOUT_S = 10.0

# Chromium phones home (updates, field trials, sync) unless told not to; in a locked-down
# network those attempts are refused and waste time, and they are egress we do not want.
BASE_ARGS = (
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
    "--metrics-recording-only",
    "--password-store=basic",
)


def chromium_args(settings: WorkerSettings) -> list[str]:
    args = list(BASE_ARGS)
    if not sandbox_enabled(settings):
        args.append("--no-sandbox")
    return args


def sandbox_enabled(settings: WorkerSettings) -> bool:
    """Explicit setting wins; by default the sandbox is on unless we run as root.

    Chromium refuses to start sandboxed as root, and Fargate grants no user namespaces, so
    containers usually run it unsandboxed and rely on the task's isolation instead.
    """
    if settings.chromium_sandbox is not None:
        return settings.chromium_sandbox
    geteuid = getattr(os, "geteuid", None)
    return not (geteuid is not None and geteuid() == 0)


def chromium_executable(settings: WorkerSettings, playwright: Playwright) -> str:
    if settings.chromium_path:
        return settings.chromium_path
    try:
        managed = playwright.chromium.executable_path
    except Exception:  # no managed browser registered for this platform
        managed = ""
    if managed and Path(managed).exists():
        return managed
    return SYSTEM_CHROMIUM


@dataclass(eq=False)
class BrowserGeneration:
    """One launched browser and the bookkeeping to retire it safely."""

    browser: Browser
    number: int
    jobs_started: int = 0
    active: int = 0
    retired: bool = False
    crashed: bool = False
    closing: bool = False


@dataclass(eq=False)
class BrowserSession:
    """A job's context and page. ``crashed`` is true if the browser or the page died under it."""

    context: BrowserContext
    page: Page
    generation: BrowserGeneration
    _release: Callable[[BrowserSession], Any] = field(repr=False)
    page_crashed: bool = False
    closed: bool = False

    @property
    def crashed(self) -> bool:
        return self.page_crashed or self.generation.crashed

    async def close(self) -> None:
        """Close the context (bounded); safe to call twice and after a crash."""
        if self.closed:
            return
        self.closed = True
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.context.close(), CONTEXT_CLOSE_TIMEOUT_S)
        finally:
            await self._release(self)


class BrowserPool:
    def __init__(
        self,
        settings: WorkerSettings,
        *,
        on_crash: Callable[[], None] | None = None,
    ) -> None:
        self._settings = settings
        self._on_crash = on_crash
        self._playwright: Playwright | None = None
        self._current: BrowserGeneration | None = None
        self._generations: set[BrowserGeneration] = set()
        self._launch_lock = asyncio.Lock()
        self._launched = 0

    async def start(self) -> None:
        self._playwright = await async_playwright().start()
        await self._browser()

    @property
    def launches(self) -> int:
        return self._launched

    async def _launch(self) -> BrowserGeneration:
        assert self._playwright is not None, "BrowserPool.start() first"
        browser = await self._playwright.chromium.launch(
            executable_path=chromium_executable(self._settings, self._playwright),
            headless=self._settings.headless,
            args=chromium_args(self._settings),
            chromium_sandbox=sandbox_enabled(self._settings),
        )
        self._launched += 1
        generation = BrowserGeneration(browser=browser, number=self._launched)
        browser.on("disconnected", lambda _b: self._on_disconnected(generation))
        self._generations.add(generation)
        return generation

    def _on_disconnected(self, generation: BrowserGeneration) -> None:
        if not generation.closing:
            generation.crashed = True
            if self._on_crash is not None:
                self._on_crash()
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

    async def new_session(self, options: JobOptions) -> BrowserSession:
        try:
            return await self._new_session(options)
        except Exception:
            current = self._current
            if current is None or current.browser.is_connected():
                raise
            # The browser died before its disconnected event reached us: relaunch once.
            self._on_disconnected(current)
            return await self._new_session(options)

    async def _new_session(self, options: JobOptions) -> BrowserSession:
        generation = await self._browser()
        generation.jobs_started += 1
        generation.active += 1
        if generation.jobs_started >= self._settings.max_jobs_per_browser:
            # This is the last job for this browser; the next one launches a fresh browser.
            generation.retired = True
            if self._current is generation:
                self._current = None
        try:
            context = await generation.browser.new_context(
                viewport={"width": options.viewport.width, "height": options.viewport.height},
                accept_downloads=True,
                service_workers="block",
            )
            context.set_default_timeout(options.action_timeout_ms)
            context.set_default_navigation_timeout(options.navigation_timeout_ms)
            page = await context.new_page()
        except BaseException:
            generation.active -= 1
            await self._maybe_close(generation)
            raise
        session = BrowserSession(
            context=context, page=page, generation=generation, _release=self._release
        )
        page.on("crash", lambda _p: setattr(session, "page_crashed", True))
        return session

    async def _release(self, session: BrowserSession) -> None:
        session.generation.active -= 1
        await self._maybe_close(session.generation)

    async def _maybe_close(self, generation: BrowserGeneration) -> None:
        if generation.retired and generation.active <= 0 and not generation.closing:
            await self._close_generation(generation)

    async def _close_generation(self, generation: BrowserGeneration) -> None:
        generation.closing = True
        self._generations.discard(generation)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(generation.browser.close(), BROWSER_CLOSE_TIMEOUT_S)

    async def close(self) -> None:
        for generation in list(self._generations):
            await self._close_generation(generation)
        self._current = None
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
