"""Irreversible steps in the worker (docs/irreversible-steps.md), besides the checkpoints
around them (``checkpointing.Progress``):

- ``resume`` is what an attempt does first when an earlier one reached such a step: run
  the step's check (in this attempt's fresh context, with the job's sessions) and go on
  after it, or from the start, as ``jobs.rules.resume_plan`` says.
- ``compensate`` runs the job's ``compensate`` steps once, recording that they started
  before they act.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Literal

from browser_task.errors import FailJob, JobFailure, RetryJob, first_line
from browser_task.run.checkpointing import CheckpointUnwritten
from browser_task.run.context import RunContext
from browser_task.run.steps import session
from pagefleet.jobs.checkpoints import Checkpoint, Compensation
from pagefleet.jobs.record_size import ERROR_MESSAGE_MAX_BYTES, clip
from pagefleet.jobs.rules import Resume, resume_plan
from pagefleet.live.events import EventType
from pagefleet.workflow import Assert, Step, UseSession

# The executor's run_steps(steps, ctx, prefix, name=..., first=...), passed in (the
# executor runs this module's parts).
RunSteps = Callable[..., Awaitable[None]]


# --- an attempt after one that reached an irreversible step ---------------------------------
async def resume(ctx: RunContext, run_steps: RunSteps) -> int:
    """Settle what earlier attempts left at stake; the index of the first step to run."""
    progress = ctx.progress
    if progress is None:
        return 0
    job = progress.job
    while True:
        plan = resume_plan(job, progress.checkpoints)
        at_stake = plan.checkpoint
        if plan.resume is Resume.START:
            ctx.result = {}
            return 0
        if at_stake is None or plan.resume not in (Resume.CHECK, Resume.CONTINUE):
            # The claim stops these before a run; a checkpoint that changed meanwhile too.
            raise FailJob(
                plan.why or "an earlier attempt's outcome is unknown", kind="needs_review"
            )
        ctx.result = dict(job.result or {})  # the results so far, as recorded
        await apply_sessions(ctx, before=at_stake.step)
        if plan.resume is Resume.CONTINUE:
            return at_stake.step + 1
        verdict = await run_check(ctx, at_stake, run_steps)
        with contextlib.suppress(CheckpointUnwritten):  # the outcome's write carries it
            await progress.record(at_stake.step, at_stake.label, verdict, "checked", ctx.result)
        if verdict == "done":
            return at_stake.step + 1
        # Not done: from the start, or from the irreversible step done before this one.


async def apply_sessions(ctx: RunContext, *, before: int) -> None:
    """The sessions the workflow uses before step ``before`` (the leading ones are in the
    context already): a check and the steps after it run as that user."""
    for index, step in enumerate(ctx.plan.steps[:before]):
        if isinstance(step, UseSession):
            await session.use_session(step, ctx, index)


async def run_check(
    ctx: RunContext, at_stake: Checkpoint, run_steps: RunSteps
) -> Literal["done", "not_done"]:
    """Run step ``index``'s check: "done" when every check step succeeds, "not_done" when
    the last one, an assert, fails. A check that fails otherwise could not tell: its
    checkpoint is recorded ``unknown`` and the attempt fails (the job goes to review). A
    failure that says nothing about the site (browser, network) is raised as it is."""
    assert ctx.progress is not None
    index = at_stake.step
    checks: list[Step] = list(ctx.plan.steps[index].check or [])
    ctx.step_index = index
    for number, check in enumerate(checks):
        try:
            await run_steps([check], ctx, f"steps[{index}].", name="check", first=number)
        except RetryJob:
            raise
        except JobFailure as failure:
            last = number == len(checks) - 1
            if last and isinstance(check, Assert) and failure.kind == "assertion_failed":
                return "not_done"
            with contextlib.suppress(CheckpointUnwritten):  # the outcome's write carries it
                await ctx.progress.record(index, at_stake.label, "unknown", "checked", ctx.result)
            raise FailJob(
                f"the check of step {index} could not tell whether it took effect: "
                f"{failure.message}",
                kind="check_failed",
            ) from None
    return "done"


# --- compensation ---------------------------------------------------------------------------
async def compensate(
    ctx: RunContext, cause: JobFailure, run_steps: RunSteps, *, bound_s: float
) -> Compensation:
    """Run the job's compensate steps once (``started`` recorded before they act); how it
    went. ``AttemptLost`` when the lease is gone: they did not run."""
    progress = ctx.progress
    assert progress is not None and ctx.plan.compensate
    reason = clip(cause.message, ERROR_MESSAGE_MAX_BYTES)
    began = Compensation(
        state="started", attempt=progress.job.attempt, at=progress.at(), reason=reason
    )
    progress.compensation = began
    try:
        await progress.write(ctx.result)
    except CheckpointUnwritten as exc:
        progress.compensation = began.model_copy(
            update={"state": "failed", "error": f"not run: its start could not be recorded ({exc})"}
        )
        return progress.compensation
    _emit(ctx, "started")
    try:
        await asyncio.wait_for(run_steps(ctx.plan.compensate, ctx, "", name="compensate"), bound_s)
    except Exception as exc:  # whatever it was, the effect may still be there
        if isinstance(exc, TimeoutError):
            message = f"it ran longer than {bound_s:.0f} s"
        else:
            message = getattr(exc, "message", None) or first_line(str(exc))
        ended = began.model_copy(
            update={
                "state": "failed",
                "at": progress.at(),
                "error": clip(message, ERROR_MESSAGE_MAX_BYTES),
            }
        )
    else:
        ended = began.model_copy(update={"state": "done", "at": progress.at()})
    progress.compensation = ended
    _emit(ctx, ended.state, ended.error)
    with contextlib.suppress(CheckpointUnwritten):  # the outcome's write carries it
        await progress.write()
    return ended


def _emit(ctx: RunContext, state: str, message: str | None = None) -> None:
    if ctx.events is not None:
        ctx.events.emit(EventType.COMPENSATION, state=state, message=message)
