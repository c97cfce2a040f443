"""Watching a running job's cancel flag, for the runner to stop the attempt on."""

from __future__ import annotations

import asyncio

from browser_task.errors import first_line
from browser_task.observe.telemetry import JobLog
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.jobs.models import JobRecord

# How often a running job's cancel flag is read: a cancel takes effect within this, plus
# the time to close the context (the promise is "within 3 seconds").
CANCEL_POLL_S = 1.0


async def watch_cancel(lifecycle: Lifecycle, job: JobRecord, log: JobLog) -> bool:
    """Poll the job's cancel flag; True once a client asked to cancel it."""
    if job.cancel_requested_at is not None:
        return True
    while True:
        await asyncio.sleep(CANCEL_POLL_S)
        try:
            if await asyncio.to_thread(lifecycle.cancel_requested, job):
                return True
        except Exception as exc:  # a missed poll only delays the cancel by one period
            log.warning("cancel check failed", error=first_line(str(exc)))
