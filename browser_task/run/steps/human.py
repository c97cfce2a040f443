"""await_human: the job parks until a person continues it, in this same browser context.

The worker keeps the attempt (its lease heartbeats on), the context and the page; the
tenant's running slot goes back while the job waits (pagefleet.jobs.lifecycle.human), and
so does the worker's slot (its next job starts) while the worker holds fewer than
``max_waiting_contexts`` such contexts; past that cap the job waits in its slot. The
record is read every ``POLL_S``: the owner's answer (``human.continued_at``) resumes the
job, taking a slot again; ``timeout_s`` unanswered fails it (``human_timeout``). A worker
that dies meanwhile leaves the job to the sweeper, which sends it to review.

In a browser session (an agent's ``await_human`` tool) the session keeps its slot while it
waits, the person's note is the step's result (``human_note``), and the timeout fails the
step, not the session: the agent reads it and goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from pagefleet.errors import LeaseLost
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import EventType
from pagefleet.workflow import AwaitHuman

POLL_S = 1.0
log = logging.getLogger("browser_task.run.steps.human")


async def await_human(step: AwaitHuman, ctx: RunContext) -> None:
    progress = ctx.progress
    if progress is None:
        raise FailJob("await_human is not supported here", kind="invalid_workflow")
    in_session = ctx.plan.request.session is not None
    lifecycle, job = progress.lifecycle, progress.job
    prompt = ctx.mask(step.prompt)
    ctx.human_wait_started = time.monotonic()
    try:
        try:
            await asyncio.to_thread(
                lifecycle.park,
                job,
                prompt=prompt,
                step_index=ctx.step_index or 0,
                timeout_s=step.timeout_s,
                keep_slot=in_session,
            )
        except LeaseLost:
            await _until_stopped()  # cancelled or taken back: the runner ends the run
        _emit(ctx, JobStatus.WAITING_FOR_HUMAN, prompt)
        if not in_session and not ctx.leave_slot():
            # The worker holds as many waiting contexts as it may: this one keeps its slot.
            _say(ctx, "the worker holds its most waiting contexts: this job waits in its slot")
        note = await _answer(ctx, job, step, in_session=in_session)
        if ctx.takeover is not None:
            # A person may have taken the page a moment before continuing: the next step
            # reads the lock now, not the last second's read, so it waits for the hand-back.
            await ctx.takeover.look()
        _emit(ctx, JobStatus.RUNNING, note or "continued by a person")
        if in_session:
            ctx.result = {**ctx.result, "human_note": ctx.mask(note or "")}
    finally:
        started, ctx.human_wait_started = ctx.human_wait_started, None
        if started is not None:
            ctx.human_waited_s += time.monotonic() - started


async def _answer(
    ctx: RunContext, job: JobRecord, step: AwaitHuman, *, in_session: bool
) -> str | None:
    """Wait for the owner's answer and resume; the person's note."""
    assert ctx.progress is not None
    lifecycle = ctx.progress.lifecycle
    while True:
        await asyncio.sleep(POLL_S)
        try:
            now = await asyncio.to_thread(lifecycle.store.get, job.tenant_id, job.job_id)
        except Exception:  # a failed read: the next one tells (the lease is the guard)
            log.warning("reading a waiting job failed", exc_info=True)
            continue
        if now.status is not JobStatus.WAITING_FOR_HUMAN or now.human is None:
            await _until_stopped()  # cancelled (the heartbeat loses the lease next)
        assert now.human is not None
        try:
            if now.human.continued_at is not None:
                resumed = await asyncio.to_thread(lifecycle.resume, job, with_slot=not in_session)
                if resumed is None:
                    continue  # the tenant is at its running cap: go on when a slot frees
                return now.human.note
            if lifecycle.clock.now() >= now.human.timeout_at:
                await asyncio.to_thread(lifecycle.resume, job, with_slot=False)
                what = "session" if in_session else "job"
                raise FailJob(
                    f"nobody continued the {what} within the await_human step's timeout_s "
                    f"({step.timeout_s} s): {now.human.prompt}",
                    kind="human_timeout",
                )
        except LeaseLost:
            await _until_stopped()


async def _until_stopped() -> None:
    """Another writer moved the job (a cancel, the sweeper): the runner sees its lease lost
    or the cancel and ends this run without writing; nothing to do here until then."""
    await asyncio.Event().wait()


def _emit(ctx: RunContext, status: JobStatus, message: str) -> None:
    if ctx.events is not None:
        ctx.events.emit(EventType.STATE, status=status.value, message=message)


def _say(ctx: RunContext, message: str) -> None:
    if ctx.events is not None:
        ctx.events.emit(EventType.LOG, level="info", message=message)
