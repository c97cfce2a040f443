"""A job's browser context opened while its claim is written, and its trace started with it.

Before a job's first step a slot waits for two things that do not need each other: the
claim (the tenant's running slot, then the job's conditional write: two round trips to
DynamoDB) and the context with its page (two round trips to the browser, ~0.2 s). The slot
starts both at once. Nothing navigates before the claim is won, and a lost claim closes the
unused context.

Only for a job whose context nothing in its preparation can change
(``pagefleet.jobs.preview.opens_early``): no proxy of its own (its egress listener is made
per job), no leading ``use_session`` (the storage state is read from the tenant's sessions),
options without ``{{...}}`` references (rendered with the tenant's secrets), and not a warm
job (``isolation: "tenant"`` takes a parked context, which is faster still). Anything else
opens its context after the claim, as before. What it opens comes from the job's preview
(its message's, or its record's), read before the claim.

An attempt's trace (browser_task.browser.tracing), when it records one, starts as part of the
context's setup, beside opening the page, instead of as one more round trip before the
first step.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from functools import partial

from playwright.async_api import BrowserContext
from playwright.async_api import Error as PlaywrightError

from browser_task.browser.pool import BrowserPool, JobBrowser
from browser_task.browser.setup import ContextSetup, together
from browser_task.browser.tracing import TraceRecorder, trace_plan
from browser_task.egress.guard import EgressGuard
from browser_task.run.executor import scheme_guard
from browser_task.run.routing import RequestRouter, with_routes
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.preview import Preview


def with_trace(setup: ContextSetup, trace: TraceRecorder | None) -> ContextSetup:
    """``setup`` plus starting ``trace`` on the new context, side by side."""
    if trace is None:
        return setup
    return together(setup, partial(_start, trace))


async def _start(trace: TraceRecorder, context: BrowserContext) -> None:
    trace.attach(context)
    # Not started is not fatal here: the workflow tries once more before its first step
    # and only a trace kept whatever happens fails the job (executor.start_tracing).
    with contextlib.suppress(PlaywrightError):
        await trace.start()


@dataclass(eq=False)
class EarlyContext:
    """A context being opened for a job whose claim is still being written."""

    options: JobOptions
    guard: EgressGuard
    router: RequestRouter
    trace: TraceRecorder | None
    opening: asyncio.Task[JobBrowser]

    def fits(self, options: JobOptions, *, storage_state: object) -> bool:
        """Whether the prepared run wants exactly the context that was opened."""
        return storage_state is None and options == self.options

    async def discard(self) -> None:
        """The claim was lost or the run needs another context: close this one unused."""
        try:
            session = await self.opening
        except Exception:
            return
        await session.close()


def open_early(browsers: BrowserPool, preview: Preview, guard: EgressGuard) -> EarlyContext | None:
    """Start opening the previewed job's context now, for the attempt its claim makes (None:
    this job opens its own later, ``pagefleet.jobs.preview.opens_early``)."""
    options = preview.options
    if options is None:
        return None
    plan = trace_plan(options.trace, preview.attempt, secrets=preview.secrets)
    trace = TraceRecorder(None, plan) if plan is not None else None
    router = RequestRouter(guard, options.block)
    setup = with_trace(with_routes(scheme_guard(guard), router), trace)
    opening = asyncio.create_task(
        browsers.new_session(options, setup=setup), name="open context early"
    )
    return EarlyContext(options, guard, router, trace, opening)
