"""Playwright tracing for a job's attempt, as Playwright Test's ``trace`` option does it.

A job's ``options.trace`` (resolved when the job was made: the job's own, else its tenant's
default, else ``on-first-retry``; pagefleet.specs.traces) says which attempts record a trace
and when the zip is kept:

- ``off``: none; ``on``: every attempt, kept;
- ``retain-on-failure``: every attempt, kept when it failed;
- ``on-first-retry`` (the default): the second attempt only, kept; ``on-all-retries``:
  every attempt after the first, kept;
- ``retain-on-first-failure``: the first attempt only, kept when it failed.

A trace can only cover what happened after ``tracing.start``, so an attempt that records one
starts it with its context. Recording costs CPU in the driver and in Chromium on every
attempt that records, which is why the default records only where a failure has been seen
already: a failed first attempt keeps its error, ``failure.png`` and ``failure.html``, and its
retry records the trace. A kept trace has DOM snapshots (it was asked for, or a retry).

A job that uses ``{{secrets.NAME}}`` records a trace only in mode ``on``, because a trace
holds the arguments of every action — a filled password included. A browser session cannot
know that when its context opens (its steps, and the secrets they use, come later), so it
records one as its mode says, and drops it at the end unless the mode is ``on`` if any of
its steps resolved a secret (``finish(secrets=...)``): the same rule, applied late.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from playwright.async_api import BrowserContext
from playwright.async_api import Error as PlaywrightError

from browser_task.errors import FailJob
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.specs.resources import DEBUG, ROUTINE
from pagefleet.specs.traces import DEFAULT_TRACE, TraceMode

TRACE_ARTIFACT = "trace.zip"
TRACE_STOP_TIMEOUT_S = 15.0
# The one mode a job using secrets records in: it asked for every attempt's trace, kept.
SECRETS_MODE: TraceMode = "on"


@dataclass(frozen=True)
class TracePlan:
    """An attempt's trace: recorded (this exists), then kept after a success, a failure."""

    mode: TraceMode
    on_success: bool
    on_failure: bool

    @property
    def with_secrets(self) -> bool:
        """Whether a run that resolved a secret may keep it."""
        return self.mode == SECRETS_MODE


def trace_plan(mode: TraceMode | None, attempt: int, *, secrets: bool) -> TracePlan | None:
    """Whether attempt ``attempt`` (1 for the first of the job's budget) records a trace, and
    when it keeps it (None: it records none)."""
    mode = mode or DEFAULT_TRACE
    if secrets and mode != SECRETS_MODE:
        return None
    retry = attempt >= 2
    records = {
        "off": False,
        "on": True,
        "retain-on-failure": True,
        "on-first-retry": attempt == 2,
        "on-all-retries": retry,
        "retain-on-first-failure": not retry,
    }[mode]
    if not records:
        return None
    on_failure_only = mode in ("retain-on-failure", "retain-on-first-failure")
    return TracePlan(mode, on_success=not on_failure_only, on_failure=True)


class TraceRecorder:
    def __init__(self, context: BrowserContext | None, plan: TracePlan) -> None:
        # None until ``attach``: a recorder made before its context, started as the
        # context's setup (browser_task.run.early).
        self._context: BrowserContext | None = None
        self.plan = plan
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
        # DOM snapshots: a trace is recorded only where it is wanted (asked for, or a retry),
        # so it gets what makes it worth opening. Screenshots stay off (the snapshots show the
        # page, and the failure's own failure.png).
        await self._context.tracing.start(screenshots=False, snapshots=True, sources=False)
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
        """Stop recording; keep the zip as the plan says (a success: routine retention, a
        failure: debug) or drop it. ``secrets``: the run resolved a secret, so a trace is kept
        only in the one mode a job using secrets records in (``on``).

        Best effort on failure: a trace that cannot be written must not hide the real error.
        """
        if not self.started or self.stopped:
            return
        keep = (self.plan.on_failure if failed else self.plan.on_success) and (
            not secrets or self.plan.with_secrets
        )
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
