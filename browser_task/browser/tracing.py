"""Playwright tracing for a job: recorded from the start, kept only when it is wanted.

A trace can only cover what happened after ``tracing.start``, so to have one for a failure
it must be recording before the failure is known. It is therefore started with every
context (actions, console, network; DOM snapshots only when the job asked for a trace) and
the zip is written and uploaded only when the job asked for it (``options.trace``) or failed.

One exception: a job that uses ``{{secrets.NAME}}`` records a trace only on request,
because a trace holds the arguments of every action — a filled password included. A
browser session cannot know that when its context opens (its steps, and the secrets they
use, come later), so it records one, and a failure drops it unless it was requested if any
of its steps resolved a secret (``finish(secrets=...)``): the same rule, applied late.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path

from playwright.async_api import BrowserContext
from playwright.async_api import Error as PlaywrightError

from browser_task.errors import FailJob
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.specs.resources import DEBUG, ROUTINE

TRACE_ARTIFACT = "trace.zip"
TRACE_STOP_TIMEOUT_S = 15.0


def traces(requested: bool, *, secrets: bool) -> bool:
    """Whether a run records the always-on trace: always, except that a job using secrets
    records one only on request (see above)."""
    return requested or not secrets


class TraceRecorder:
    def __init__(self, context: BrowserContext | None, *, requested: bool) -> None:
        # None until ``attach``: a recorder made before its context, started as the
        # context's setup (browser_task.run.early).
        self._context: BrowserContext | None = None
        self.requested = requested
        self.started = False
        self.stopped = False
        if context is not None:
            self.attach(context)

    def attach(self, context: BrowserContext) -> None:
        self._context = context
        # However the context ends (closed by a guard, discarded unused, crashed), the
        # recording is released (see ``discard``).
        context.on("close", self._on_close)

    async def _on_close(self, _context: BrowserContext) -> None:
        await self.discard()

    def _stopping(self) -> None:
        self.stopped = True
        if self._context is not None:
            with contextlib.suppress(Exception):
                self._context.remove_listener("close", self._on_close)

    async def start(self) -> None:
        assert self._context is not None, "attach the context first"
        # A requested trace gets DOM snapshots; the always-on one that exists in case of a
        # failure records actions, console and network only (snapshots cost ~10 % of a
        # worker's throughput), and the failure's own failure.html / failure.png show the page.
        await self._context.tracing.start(
            screenshots=False, snapshots=self.requested, sources=False
        )
        self.started = True

    async def discard(self) -> None:
        """Stop recording and drop it, before the context closes or after.

        Closing the context is not enough. Playwright's client keeps for each started trace
        a temporary directory and a list to which the driver appends the stack of every
        later call, from any context; only ``tracing.stop`` releases them. A worker that
        only closed its contexts left a ``playwright-tracing-*`` directory a job, and its
        driver's memory grew with the square of the jobs run. Stopping costs a job no
        measurable time (docs/performance.md, "The trace's leak").
        """
        if not self.started or self.stopped:
            return
        self._stopping()
        assert self._context is not None  # started, so attached
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(self._context.tracing.stop(), TRACE_STOP_TIMEOUT_S)

    async def finish(
        self, artifacts: ArtifactCollector, *, failed: bool, secrets: bool = False
    ) -> None:
        """Stop recording; keep the zip (requested: routine, failure: debug) or drop it.
        ``secrets``: the run resolved a secret, so an unrequested trace is never kept.

        Best effort on failure: a trace that cannot be written must not hide the real error.
        """
        if not self.started or self.stopped:
            return
        keep = self.requested or (failed and not secrets)
        if not keep:
            await self.discard()
            return
        self._stopping()
        assert self._context is not None  # started, so attached
        with tempfile.TemporaryDirectory(prefix="pagefleet-trace-") as tmp:
            path = Path(tmp) / TRACE_ARTIFACT
            try:
                await asyncio.wait_for(
                    self._context.tracing.stop(path=str(path)), TRACE_STOP_TIMEOUT_S
                )
                data = path.read_bytes()
            except (PlaywrightError, TimeoutError, OSError):
                if failed:
                    return
                raise
        retention = DEBUG if failed else ROUTINE
        if failed:
            with contextlib.suppress(FailJob):  # too large: skip it, keep the real failure
                artifacts.add(TRACE_ARTIFACT, data, "application/zip", retention=retention)
        else:
            artifacts.add(TRACE_ARTIFACT, data, "application/zip", retention=retention)
