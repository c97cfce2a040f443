"""``expect`` in the worker: the finished run's result against the job's expectations.

A result that breaks them fails the run ``data_quality`` while its page is still open, so
``failure.png``, ``failure.html`` and the trace are kept as for any failure. It is not
retried (the site changed; another try would read the same page) unless ``expect.retry``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from browser_task.run.url_patterns import SchemaSearch
from pagefleet.jobs.record import JobError
from pagefleet.monitors.expect import Breach, breaches, summary


class DataQualityFailed(FailJob):
    default_kind = "data_quality"

    def __init__(self, found: list[Breach], *, retry: bool, mask: Any) -> None:
        super().__init__(mask(summary(found)))
        self.retryable = retry
        self.details = [{"path": b.path, "reason": mask(b.reason)} for b in found]

    def to_job_error(self) -> JobError:
        return super().to_job_error().model_copy(update={"details": self.details})


async def check_expectations(ctx: RunContext) -> None:
    """Raise ``DataQualityFailed`` naming every breach of ``expect`` (none: return)."""
    expect = ctx.plan.request.expect
    if expect is None:
        return
    # A schema's patterns run on page data: off the event loop, which serves every slot,
    # and each search bounded (a thread alone would not spare the loop: re holds the GIL).
    found = await asyncio.to_thread(breaches, ctx.result, expect, search=SchemaSearch())
    if found:
        raise DataQualityFailed(found, retry=expect.retry, mask=ctx.mask)
