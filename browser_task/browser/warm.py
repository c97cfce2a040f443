"""Warm browser contexts for jobs that allow it (``options.isolation: "tenant"``).

A job that succeeded leaves its context (and its page, back on ``about:blank``) parked
here under a key made of its tenant, the worker's pool and its options; the next job with
the same key runs in it instead of a fresh one. What carries over from job to job: cookies,
localStorage / sessionStorage / IndexedDB of the origins visited, the HTTP cache, and the
renderer process of the page. Nothing else is shared: the key never matches another tenant,
and jobs with a saved login (``use_session`` / ``save_session``), their own proxy, routes
(``options.block``, ``route`` steps) or a HAR recording never get or leave a warm context.

A context is dropped (closed) when the job in it did not succeed, after
``MAX_JOBS_PER_CONTEXT`` jobs, after ``IDLE_S`` unused, when its browser is replaced, and
when more than ``capacity`` are parked (oldest first).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playwright.async_api import BrowserContext, Page

from browser_task.browser.generation import BrowserGeneration
from browser_task.observe.request_events import on_request
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.workflow import Route, SaveSession, UseSession, iter_steps

log = logging.getLogger("pagefleet.browser")

MAX_JOBS_PER_CONTEXT = 50
IDLE_S = 60.0
RESET_TIMEOUT_S = 5.0


def warm_key(tenant_id: str, pool: str, options: JobOptions) -> str:
    """Same tenant, same pool, same options (rendered: secrets in headers included, hence
    the hash: keys are never logged in clear)."""
    raw = f"{tenant_id}\n{pool}\n{options.model_dump_json()}"
    return hashlib.sha256(raw.encode()).hexdigest()


def allows_warm(request: JobRequest, options: JobOptions, *, storage_state: Any) -> bool:
    """Whether this job may run in (and leave) a warm context."""
    if options.isolation != "tenant" or options.proxy is not None or storage_state is not None:
        return False
    if options.video:  # a recording belongs to its context: one job's video only
        return False
    # Routes and a HAR recording belong to the job that set them.
    if options.block is not None or options.har or request.replay is not None:
        return False
    return not any(
        isinstance(step, UseSession | SaveSession | Route) for _, step in iter_steps(request.steps)
    )


class RecordingContext:
    """A context as a setup function sees it: the listeners it adds are noted, so a warm
    context can drop them before the next job."""

    def __init__(self, context: BrowserContext, added: list[tuple[str, Callable[..., Any]]]):
        self._context = context
        self._added = added

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        if event == "request":  # one Playwright listener a context (request_events says why)
            on_request(self._context, self._added, handler)
            return
        self._added.append((event, handler))
        self._context.on(event, handler)  # type: ignore[call-overload]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


@dataclass(eq=False)
class Parked:
    key: str
    context: BrowserContext
    page: Page
    generation: BrowserGeneration
    jobs: int
    since: float


class WarmContexts:
    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._parked: OrderedDict[int, Parked] = OrderedDict()
        self.reused = 0
        self.dropped: dict[str, int] = {}

    def take(self, key: str, usable: Callable[[Any], bool]) -> Parked | None:
        """The most recently parked context for ``key`` on a usable browser, if any."""
        for ident, parked in reversed(self._parked.items()):
            if parked.key == key and usable(parked.generation):
                del self._parked[ident]
                self.reused += 1
                return parked
        return None

    async def park(
        self,
        key: str,
        context: BrowserContext,
        page: Page,
        generation: BrowserGeneration,
        jobs: int,
        listeners: list[tuple[str, Callable[..., Any]]],
    ) -> bool:
        """Reset the context for the next job and keep it; False (and closed) if it cannot."""
        for event, handler in listeners:  # "page:crash" is the page's, the rest the context's
            with contextlib.suppress(Exception):
                if event.startswith("page:"):
                    page.remove_listener(event.removeprefix("page:"), handler)
                else:
                    context.remove_listener(event, handler)
        if jobs >= MAX_JOBS_PER_CONTEXT:
            await self._close(context, generation, "jobs")
            return False
        try:
            await generation.within(self._reset(context, page), RESET_TIMEOUT_S)
        except Exception as exc:
            log.debug("warm context reset failed: %s", exc)
            await self._close(context, generation, "reset")
            return False
        self._parked[id(context)] = Parked(key, context, page, generation, jobs, time.monotonic())
        await self.expire()
        return True

    @staticmethod
    async def _reset(context: BrowserContext, page: Page) -> None:
        # The previous job's document, timers and sockets go. Its recorder has stopped its
        # trace (browser_task.browser.tracing); this stops one left running, as the next job starts
        # its own.
        with contextlib.suppress(Exception):
            await context.tracing.stop()
        await page.goto("about:blank")
        for extra in context.pages:
            if extra is not page:
                await extra.close()

    async def expire(self) -> None:
        """Close what idled too long and what is over capacity (oldest first)."""
        now = time.monotonic()
        for ident, parked in list(self._parked.items()):
            over = len(self._parked) > self.capacity
            if over or now - parked.since > IDLE_S:
                del self._parked[ident]
                await self._close(parked.context, parked.generation, "capacity" if over else "idle")

    async def drop_generation(self, generation: BrowserGeneration) -> None:
        dropped = [p for p in self._parked.values() if p.generation is generation]
        for parked in dropped:
            del self._parked[id(parked.context)]
        await self._close_each(dropped, "browser")

    async def close_all(self) -> None:
        parked, self._parked = list(self._parked.values()), OrderedDict()
        await self._close_each(parked, "stop")

    async def _close_each(self, parked: list[Parked], reason: str) -> None:
        # Each close is bounded on its own: side by side, not one bound after another.
        await asyncio.gather(*(self._close(p.context, p.generation, reason) for p in parked))

    async def _close(
        self, context: BrowserContext, generation: BrowserGeneration, reason: str
    ) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        with contextlib.suppress(Exception):  # a dead browser's is not waited on (``within``)
            await generation.within(context.close(), RESET_TIMEOUT_S)

    def __len__(self) -> int:
        return len(self._parked)
