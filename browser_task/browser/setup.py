"""What runs on a job's new context before its page's first request: its setups.

A setup is a coroutine function given the context. Most (the scheme watch, starting a
trace) run beside opening the page: both are round trips to the browser and neither needs
the other. Routes are different. Playwright applies a context's routes to the pages the
context has when they are set, and a page that opens at that moment can miss them: an
offline replay's page then went to the live site instead of its HAR (about one run in ten
on a loaded machine). A setup that routes is marked ``RoutesFirst``, and the page opens
only after it (one round trip more, for the jobs that route only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from playwright.async_api import BrowserContext

ContextSetup = Callable[[BrowserContext], Awaitable[None]]


@dataclass(frozen=True)
class RoutesFirst:
    """A setup that installs routes: the context's page opens after it, never beside it."""

    setup: ContextSetup

    async def __call__(self, context: BrowserContext) -> None:
        await self.setup(context)


def together(*setups: ContextSetup) -> ContextSetup:
    """``setups`` side by side, as one; it routes first if any of them does."""

    async def install(context: BrowserContext) -> None:
        await asyncio.gather(*(setup(context) for setup in setups))

    return RoutesFirst(install) if any(isinstance(s, RoutesFirst) for s in setups) else install
