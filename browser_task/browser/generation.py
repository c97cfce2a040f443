"""A launched browser (its generation) and a job's session in it (see browser_task.browser.pool)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psutil
from playwright.async_api import Browser, BrowserContext, Page

from browser_task.egress.proxy import EgressProxy

log = logging.getLogger("pagefleet.browser")

CONTEXT_CLOSE_TIMEOUT_S = 5.0
# A recorded context's close waits for ffmpeg to finish the video.
VIDEO_CLOSE_TIMEOUT_S = 30.0

T = TypeVar("T")


class RelaunchBrowser(Exception):
    """The browser a call waited on is gone: open on a new one; there is nothing to close."""


@dataclass(eq=False)
class BrowserGeneration:
    """One launched browser and the bookkeeping to retire it safely."""

    browser: Browser
    number: int
    process: psutil.Process | None = None
    # Last seen members of the process tree: renderers orphaned by a crash are no longer
    # children of the browser, but these (pid + start time checked by psutil) still name them.
    known: dict[int, psutil.Process] = field(default_factory=dict)
    memory_checked_at: float = 0.0
    retire_reason: str | None = None
    jobs_started: int = 0
    active: int = 0
    retired: bool = False
    crashed: bool = False
    closing: bool = False
    # Set once the browser is gone: its process exited or Playwright said ``disconnected``.
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    # Stops watching the browser process's exit (browser_task.browser.process_tree.watch_exit).
    unwatch: Callable[[], None] = lambda: None

    def dead(self) -> bool:
        """Gone, or found dead before that was told: its process exited, or Playwright has
        no connection to it."""
        if self.gone.is_set() or not self.browser.is_connected():
            return True
        try:
            return self.process is not None and self.process.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True

    async def within(self, call: Awaitable[T], timeout: float) -> T:
        """``call``, bounded by ``timeout`` (TimeoutError) and by this browser's life.

        A call still waiting when the browser dies may never be answered (a page being made
        as its browser was killed was not, until its bound ran out), so once the browser is
        gone it is not waited on, and a call made after is not started: RelaunchBrowser.
        """
        task = asyncio.ensure_future(call)
        if self.gone.is_set():
            task.cancel()
            raise RelaunchBrowser(f"browser {self.number} is gone")
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            done, _ = await asyncio.wait(
                {task, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            task.cancel()
            raise
        finally:
            gone.cancel()
        if task in done:
            return task.result()
        task.cancel()
        task.add_done_callback(_settled)
        if gone in done:
            raise RelaunchBrowser(f"browser {self.number} died while it was being waited on")
        raise TimeoutError


def _settled(task: asyncio.Future[Any]) -> None:
    """A call given up on: its late failure is expected, not an unretrieved exception."""
    if not task.cancelled():
        with contextlib.suppress(BaseException):
            task.exception()


@dataclass(eq=False)
class JobBrowser:
    """A job's browser: its context and page (not a browser session, pagefleet.browsing, nor a
    saved login). ``crashed`` is true if the browser or the page died under it."""

    context: BrowserContext
    page: Page
    generation: BrowserGeneration
    _release: Callable[[JobBrowser], Any] = field(repr=False)
    page_crashed: bool = False
    closed: bool = False
    # Its context would not close in time: the pool stops giving its browser jobs.
    wedged: bool = False
    # The job's own egress listener when it has a per-job upstream proxy (closed with it).
    egress: EgressProxy | None = None
    # Warm contexts (browser_task.browser.warm): set for jobs that allow one; the runner sets
    # ``reusable`` when the job succeeded, and only then is the context parked, not closed.
    warm_key: str | None = None
    reusable: bool = False
    jobs: int = 1
    listeners: list[tuple[str, Callable[..., Any]]] = field(default_factory=list)
    # Where Playwright records this context's video (options.video); removed once kept.
    video_dir: str | None = None
    # Where Playwright writes this context's HAR as it closes (options.har).
    har_path: str | None = None
    _park: Callable[[JobBrowser], Awaitable[bool]] | None = field(default=None, repr=False)

    @property
    def crashed(self) -> bool:
        return self.page_crashed or self.generation.crashed

    def watch_crash(self) -> None:
        """Note its page's crash (a listener dropped when a warm context is parked)."""

        def crashed(_page: Page) -> None:
            self.page_crashed = True

        self.page.on("crash", crashed)
        self.listeners.append(("page:crash", crashed))

    async def close(self) -> None:
        """Close the context (bounded), or park it warm; safe to call twice and after a
        crash."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.warm_key is not None and self.reusable and self._park is not None:
                # Parked for the next job, or closed by the pool when it could not be.
                await self._park(self)
                return
            recording = self.video_dir is not None or self.har_path is not None
            timeout = VIDEO_CLOSE_TIMEOUT_S if recording else CONTEXT_CLOSE_TIMEOUT_S
            try:
                await self.generation.within(self.context.close(), timeout)
            except RelaunchBrowser:
                pass  # closed with its dead browser: nothing to wait for
            except TimeoutError:
                # A context that will not close means a wedged browser: stop giving it jobs
                # (the other slot's job finishes there) and let it close when it is idle.
                self.wedged = True
            except Exception as exc:  # already gone with a crashed page or browser
                log.debug("context close failed: %s", exc)
        finally:
            if self.egress is not None:
                await self.egress.close()
            await self._release(self)
