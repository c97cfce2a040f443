"""How a run that did not simply succeed ends: the outcome the worker asks the lifecycle
to write for a cancel, a drain, the job's watchdog or a failed workflow.

With an irreversible step at stake (``irreversible.Progress``) the lifecycle decides with
the attempt's checkpoints: again only through the step's check, or in review; a failure
after its effect runs the job's ``compensate`` steps once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from browser_task.errors import JobFailure
from browser_task.run.context import RunContext
from browser_task.run.executor import run_steps
from browser_task.run.irreversible import compensate
from browser_task.run.spend import cap_message
from pagefleet.jobs.checkpoints import for_review
from pagefleet.jobs.lifecycle import Lifecycle, Outcome
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.spend import COST_CAP_KIND
from pagefleet.jobs.states import JobStatus


def refused(
    lifecycle: Lifecycle,
    job: JobRecord,
    failure: JobFailure,
    result: dict[str, Any] | None = None,
    artifacts: list[Any] | None = None,
) -> Outcome:
    """A failure outside the workflow (before its first step, or in the uploads after it):
    retry or fail, with no checkpoints to weigh."""
    outcome = lifecycle.after_failure(
        job, failure.to_job_error(), result=result or {}, artifacts=artifacts or []
    )
    # The breakers charge the origin that failed, not the one the job was admitted on.
    return replace(outcome, failed_origin=failure.origin)


def failed_at(
    lifecycle: Lifecycle, job: JobRecord, error: JobError, ctx: RunContext, artifacts: list[Any]
) -> Outcome:
    """A failure of a run that had started: retry, fail or review, with its checkpoints."""
    return lifecycle.after_failure(
        job,
        error,
        result=ctx.result,
        artifacts=artifacts,
        checkpoints=ctx.progress.view() if ctx.progress else None,
    )


async def failed(
    lifecycle: Lifecycle, job: JobRecord, failure: JobFailure, ctx: RunContext
) -> Outcome:
    """The workflow raised; after an irreversible step took effect, a failure that fails
    the job runs its compensate steps first (a failed compensation: review). Raises
    ``irreversible.AttemptLost`` when the lease went while compensating."""
    outcome = failed_at(lifecycle, job, failure.to_job_error(), ctx, [])
    at_stake = ctx.progress is not None and ctx.progress.at_stake
    if outcome.status is JobStatus.FAILED and job.request.compensate and at_stake:
        bound = float(job.request.options.job_timeout_s)
        done = await compensate(ctx, failure, run_steps, bound_s=bound)
        outcome = lifecycle.compensated(job, outcome, done)
    # The breakers charge the origin that failed, not the one the job was admitted on.
    return replace(outcome, failed_origin=failure.origin)


def cancelled(ctx: RunContext, artifacts: list[Any]) -> Outcome:
    """Cancelled while running; an irreversible step cut short is recorded ``unknown``."""
    error = JobError(
        kind="cancelled",
        message="cancelled by the client while running",
        step_index=ctx.step_index,
    )
    checkpoints = ctx.progress.view() if ctx.progress else None
    return Outcome(
        JobStatus.CANCELLED,
        result=ctx.result or None,
        error=error,
        artifacts=artifacts,
        checkpoints=for_review(checkpoints) if checkpoints else None,
    )


def interrupted(
    lifecycle: Lifecycle, job: JobRecord, ctx: RunContext, artifacts: list[Any]
) -> Outcome:
    """The worker drained before the job finished: its message goes back to the queue."""
    error = JobError(
        kind="interrupted",
        message="the worker shut down before the job finished; it will run again",
        retryable=True,
        step_index=ctx.step_index,
    )
    if ctx.progress is not None and ctx.progress.at_stake:
        outcome = failed_at(lifecycle, job, error, ctx, artifacts)
        return replace(outcome, release_message=outcome.status is JobStatus.RETRY_SCHEDULED)
    return Outcome(
        JobStatus.RETRY_SCHEDULED, error=error, artifacts=artifacts, release_message=True
    )


def spend_cap_reached(
    lifecycle: Lifecycle, job: JobRecord, ctx: RunContext, artifacts: list[Any]
) -> Outcome:
    """The run spent what its ``max_cost_usd`` bought (browser_task.run.spend): failed,
    never retried (with an irreversible step at stake, as its checkpoints say)."""
    step = ctx.step_index
    error = JobError(
        kind=COST_CAP_KIND,
        message=cap_message(job),
        step_index=step,
        step=ctx.plan.labels[step] if step is not None and step < len(ctx.plan.labels) else None,
    )
    return failed_at(lifecycle, job, error, ctx, artifacts)


def timed_out(
    lifecycle: Lifecycle, job: JobRecord, ctx: RunContext, artifacts: list[Any]
) -> Outcome:
    """The job's watchdog: timed_out by name, unless an irreversible step is at stake (the
    site may have acted without answering in time: its check, or a person)."""
    request = job.request
    step = ctx.step_index
    error = JobError(
        kind="timeout",
        message=f"the job ran longer than its job_timeout_s of {request.options.job_timeout_s} s",
        timeout="job",
        step_index=step,
        step=ctx.plan.labels[step] if step is not None and step < len(ctx.plan.labels) else None,
    )
    if ctx.progress is not None and ctx.progress.at_stake:
        return failed_at(lifecycle, job, error, ctx, artifacts)
    return Outcome(JobStatus.TIMED_OUT, result=ctx.result or None, error=error, artifacts=artifacts)
