"""A job's ``max_cost_usd`` on the worker: what this attempt may still spend.

The cap comes priced in browser-seconds (``pagefleet.jobs.spend.CostCap``, worked out where
the job was made); what an attempt has left is its record's ``spend_left_s``. Browser-seconds
are counted as usage counts them (observe.usage): an attempt's time from its start to its
end, a wait for a person included (the context is kept). An attempt that starts with nothing
left fails at once, before any browser work; one that spends the rest is stopped as the
watchdog stops a run (runner, endings).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.spend import COST_CAP_KIND


def cap_message(job: JobRecord) -> str:
    return (
        f"the job reached its spend cap (max_cost_usd {job.request.max_cost_usd}) and was "
        "stopped; resubmit it with a higher max_cost_usd to go on"
    )


def nothing_left(job: JobRecord) -> FailJob:
    """The failure of an attempt that starts with the cap already spent."""
    return FailJob(cap_message(job), kind=COST_CAP_KIND)


async def within_budgets(job: JobRecord, ctx: RunContext, ends: set[asyncio.Task[Any]]) -> bool:
    """Wait for the first of ``ends``, within the run's two budgets: ``job_timeout_s`` (the
    run's own time: a wait for a person, bounded by its timeout_s, does not count) and what
    ``max_cost_usd`` buys (a wait for a person counts). True when the spend cap ran out."""
    began = time.monotonic()
    spend_s = job.spend_left_s()
    timeout_s = job.request.options.job_timeout_s
    waited = False  # until the first wait, nobody can hold the page: nothing was paused
    while True:
        now = time.monotonic()
        paused = ctx.paused_s(now) if waited else 0.0
        left = min(timeout_s + paused - (now - began), spend_s - (now - began))
        if left <= 0:
            return now - began >= spend_s
        done, _ = await asyncio.wait(ends, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        if done:
            return False
        waited = True
