"""Watching a running job's signals: its cancel flag, for the runner to stop the attempt on,
its watchers, for the live view (``browser_task.observe.screencast``), and the person
holding its page, for its steps to wait (``browser_task.run.takeover``)."""

from __future__ import annotations

import asyncio

from browser_task.errors import first_line
from browser_task.observe.screencast import LiveView
from browser_task.observe.telemetry import JobLog
from browser_task.run.takeover import PageTakeover
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.jobs.record import JobRecord

# How often a running job's signals are read: a cancel takes effect within this, plus
# the time to close the context (the promise is "within 3 seconds"); a watcher's first
# frame comes within it too.
CANCEL_POLL_S = 1.0


async def watch_cancel(
    lifecycle: Lifecycle,
    job: JobRecord,
    log: JobLog,
    view: LiveView | None = None,
    takeover: PageTakeover | None = None,
) -> bool:
    """Poll the job's signals (one small read a second, which the live view and the takeover
    share); True once a client asked to cancel it. ``view`` is given the job's watchers
    each time, ``takeover`` its lock."""
    if job.cancel_requested_at is not None:
        return True
    while True:
        await asyncio.sleep(CANCEL_POLL_S)
        try:
            signals = await asyncio.to_thread(lifecycle.run_signals, job)
        except Exception as exc:  # a missed poll only delays the cancel by one period
            log.warning("cancel check failed", error=first_line(str(exc)))
            continue
        if signals.cancel_requested:
            return True
        if view is not None:
            try:
                await view.update(signals.watchers)
            except Exception as exc:  # the live view never stops the run
                log.warning("live view failed", error=first_line(str(exc)))
        if takeover is not None:
            try:
                await takeover.seen(signals.takeover)
            except Exception as exc:  # nor does a takeover: its next second tells
                log.warning("takeover failed", error=first_line(str(exc)))
