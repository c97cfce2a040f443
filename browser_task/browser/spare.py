"""A context and page made ahead while the worker runs no job, for the next job to take.

A context's first page starts a renderer process: 0.1-0.2 s of the browser's time that a
job otherwise spends after its claim, and that a browser session's first step waits on. A
worker whose slots are all free makes one context ahead, with the context options a job or
session has when it sets none (``SPARE_OPTIONS``) and no setups, and the next job whose
context would be that one takes it and applies its setups then (the scheme watch, a
trace), as a warm context's job does (browser_task.browser.warm). Its page is on
``about:blank`` and has made no request; nothing of any tenant has been in it.

What never takes it: a job whose options shape the context otherwise (viewport, user
agent, locale, time zone, extra headers), one with a saved login, its own proxy, routes
(they are in place before the page opens: browser_task.browser.setup), a video or a HAR.

It is made only when no job runs, so a busy worker makes no more contexts than before; a
job that cannot take it while the worker's slots fill closes it, so the worker never holds
more contexts than slots. None is made once the worker drains; one held is dropped with its
browser and at stop. A pool's ``spare_context: false`` turns it off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import BrowserContext, Page

from browser_task.browser.generation import CONTEXT_CLOSE_TIMEOUT_S, BrowserGeneration
from browser_task.browser.setup import ContextSetup, RoutesFirst
from pagefleet.jobs.options import JobOptions

log = logging.getLogger("pagefleet.browser")

SPARE_OPTIONS = JobOptions()


def context_shape(options: JobOptions) -> tuple[Any, ...]:
    """What of a job's options its context is made with (browser_task.browser.contexts);
    the timeouts are set on a context at any time, so they are not part of it."""
    return (
        options.viewport,
        options.user_agent,
        options.locale,
        options.timezone_id,
        options.extra_headers or None,
    )


def fits(
    options: JobOptions,
    *,
    storage_state: object,
    egress: object,
    setup: ContextSetup | None,
) -> bool:
    """Whether a job with these may run in the spare context."""
    if storage_state is not None or egress is not None or isinstance(setup, RoutesFirst):
        return False
    if options.video or options.har:
        return False
    return context_shape(options) == context_shape(SPARE_OPTIONS)


@dataclass(eq=False)
class Made:
    context: BrowserContext
    page: Page
    generation: BrowserGeneration
    # Its page's renderer died while it waited (the one thing that can happen to it).
    crashed: list[bool] = field(default_factory=list)

    def whole(self) -> bool:
        return not self.crashed and not self.page.is_closed()


class SpareContext:
    """At most one context made ahead (see the module's docstring)."""

    def __init__(self, enabled: bool = True) -> None:
        # Off by setting, or once the worker drains: one held is still closed by ``drop``.
        self.enabled = enabled
        self._making: asyncio.Task[Made | None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.made = 0
        self.taken = 0
        self.dropped = 0

    @property
    def held(self) -> bool:
        return self._making is not None

    async def ready(self) -> bool:
        """Whether a spare is held, once the one being made (if any) is made."""
        making = self._making
        if making is None:
            return False
        await asyncio.wait({making})
        return self._making is making and not making.cancelled() and making.result() is not None

    def make(
        self, generation: BrowserGeneration, opening: Callable[[], Awaitable[tuple[Any, Any]]]
    ) -> None:
        """Start making the spare on ``generation`` (nothing if one is held or being made;
        one whose making failed is let go)."""
        making = self._making
        if not self.enabled or (
            making is not None and not (making.done() and making.result() is None)
        ):
            return

        async def make() -> Made | None:
            try:
                context, page = await opening()
            except Exception as exc:  # the next job opens its own, and says why if it fails
                log.debug("spare context not made: %s", exc)
                return None
            made = Made(context, page, generation)
            page.on("crash", lambda _page: made.crashed.append(True))
            self.made += 1
            return made

        self._making = asyncio.get_running_loop().create_task(make(), name="spare context")

    def stop(self) -> None:
        """No more spares: the worker drains or stops."""
        self.enabled = False

    async def take(self, usable: Callable[[BrowserGeneration], bool]) -> Made | None:
        """The spare (waited for if it is still being made) if its browser is ``usable``."""
        made = await self._claim()
        if made is None:
            return None
        if not usable(made.generation) or not made.whole():
            await self._close(made)
            return None
        self.taken += 1
        return made

    async def drop(self) -> None:
        """Close the spare, if any (the worker stops, its browser goes, or its slots fill).
        One being made is waited for, not cancelled: a context whose making is cancelled
        is still made in the browser, and nothing would close it."""
        made = await self._claim()
        if made is not None:
            await self._close(made)

    async def drop_generation(self, generation: BrowserGeneration) -> None:
        """Close the spare if it is ``generation``'s (a browser that closes)."""
        making = self._making
        if making is not None and making.done() and not making.cancelled():
            made = making.result()
            if made is None or made.generation is generation:
                await self.drop()

    async def _claim(self) -> Made | None:
        # One caller has it: two slots opening at once do not both get the same context.
        making, self._making = self._making, None
        if making is None:
            return None
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:
            if making.cancelled():  # the loop is closing: nothing left to close it with
                raise
            if self._making is None:
                self._making = making  # the caller was cancelled: held for the next one
            else:
                making.add_done_callback(self._close_when_made)
            raise

    def _close_when_made(self, making: asyncio.Task[Made | None]) -> None:
        if not making.cancelled() and making.result() is not None:
            made = making.result()
            assert made is not None
            task = asyncio.get_running_loop().create_task(self._close(made))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close(self, made: Made) -> None:
        self.dropped += 1
        with contextlib.suppress(Exception):  # a dead browser's is not waited on (``within``)
            await made.generation.within(made.context.close(), CONTEXT_CLOSE_TIMEOUT_S)
