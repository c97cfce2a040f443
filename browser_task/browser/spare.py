"""One fresh context and page made ahead, for the next job or session that wants the default.

Opening a context and then its page are two round trips to the browser, and the page's
renderer process has to start: 0.1-0.3 s on every job's and every browser session's way to
its first step, the largest part of a session's start that is ours (docs/performance.md,
"A session's start"). The pool keeps one context made while nothing waits for it (at start,
and again each time a job's context closes) and gives it to the next job whose context would
be the same: no proxy of its own, no saved login, no video or HAR, the default viewport and
identity (``fits``). It is set up for that job as a warm context is (its routes and listeners
go on before the page's first request: the page has made none), and closed with the job.

A spare has never been used: a context no job has touched, so no cookie, storage or cache of
anyone's. It is used by one job only and closed with that job, as a context opened for the
job would be; nothing of a job stays behind for the next (that is what ``isolation:
"tenant"`` warm contexts do, under their own rules).

A spare made on a browser that has since been retired or has crashed, or whose page crashed
while it waited, is closed unused; the job opens its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from playwright.async_api import BrowserContext, Page

from browser_task.browser.generation import CONTEXT_CLOSE_TIMEOUT_S, BrowserGeneration
from pagefleet.jobs.options import JobOptions

log = logging.getLogger("pagefleet.browser")

_DEFAULT = JobOptions()


def fits(options: JobOptions) -> bool:
    """Whether a context opened with the default options is the context ``options`` asks for
    (a job's own proxy and saved login are the caller's to rule out)."""
    return (
        not options.video
        and not options.har
        and not options.extra_headers
        and options.viewport == _DEFAULT.viewport
        and options.user_agent == _DEFAULT.user_agent
        and options.locale == _DEFAULT.locale
        and options.timezone_id == _DEFAULT.timezone_id
    )


@dataclass(eq=False)
class Made:
    """A spare context and its blank page, on the browser it was made on."""

    context: BrowserContext
    page: Page
    generation: BrowserGeneration
    # Set by the page's crash listener while it waits (the one thing it can change).
    crashed: list[bool] = field(default_factory=list)

    async def discard(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.context.close(), CONTEXT_CLOSE_TIMEOUT_S)


Opener = Callable[[], Awaitable[tuple[BrowserContext, Page, BrowserGeneration]]]


class SpareContext:
    """At most one context made ahead (see the module's docstring)."""

    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self._making: asyncio.Task[Made] | None = None
        self._stopped = False
        self.made = 0
        self.taken = 0

    def replenish(self) -> None:
        """Make a spare if there is none (or none being made)."""
        if self._stopped or self._making is not None:
            return
        self._making = asyncio.get_running_loop().create_task(self._make(), name="spare context")

    async def _make(self) -> Made:
        context, page, generation = await self._opener()
        made = Made(context, page, generation)
        page.on("crash", lambda _page: made.crashed.append(True))
        self.made += 1
        return made

    async def take(self, usable: Callable[[BrowserGeneration], bool]) -> Made | None:
        """The spare (awaited if it is still being made: no slower than opening one now), or
        None when there is none or it can no longer be used (then closed)."""
        making, self._making = self._making, None
        if making is None:
            return None
        try:
            made = await making
        except Exception as exc:  # the browser was closing or dead: the job opens its own
            log.debug("spare context not made: %s", exc)
            return None
        if made.crashed or made.page.is_closed() or not usable(made.generation):
            await made.discard()
            return None
        self.taken += 1
        return made

    async def close(self) -> None:
        """No more spares; the one made (or being made) is closed."""
        self._stopped = True
        making, self._making = self._making, None
        if making is None:
            return
        if not making.done():
            making.cancel()  # the browsers close next, and any context half made with them
        await asyncio.wait([making])
        if not making.cancelled() and making.exception() is None:
            await making.result().discard()
