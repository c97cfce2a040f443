"""The values the lifecycle answers with: what to do with a message, how an attempt ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pagefleet.jobs.checkpoints import Checkpoint, Compensation
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.preview import Preview
from pagefleet.jobs.record import Artifact, JobError, JobMessage, JobRecord, RunMetrics
from pagefleet.jobs.rules import Resume, ResumePlan
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.step_times import StepTime
from pagefleet.monitors.changes import Changes


class Then(StrEnum):
    """What to do with the message that asked for a move."""

    RUN = "run"  # the job is claimed: run it
    DELETE = "delete"  # done with (deleted by the lifecycle)
    HIDE = "hide"  # hidden for a while (done by the lifecycle)
    RELEASE = "release"  # visible again at once (done by the lifecycle)
    LEAVE = "leave"  # untouched: its visibility timeout brings it back


@dataclass(frozen=True)
class MessageAnswer:
    """The answer to a message: what became of it, the job when it must run, and why."""

    then: Then
    job: JobRecord | None = None
    reason: str = ""
    status: JobStatus | None = None  # the final state this move wrote, if any
    # A browser session this move ended after its worker stopped (its page cannot be
    # carried to another attempt): counted where BrowserSessionsLost is read.
    session_lost: bool = False
    # Run-event numbers the claim reserved on the record it returned (``job``): the last
    # ``events_reserved`` up to its ``events_seq``. 0: none, or not known (a reply lost).
    events_reserved: int = 0
    # A look before the claim that found the job to run: what the worker needs of it first.
    preview: Preview | None = None


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended, as the worker saw it (a changed one is a new value:
    ``dataclasses.replace``)."""

    status: JobStatus
    result: dict[str, Any] | None = None
    error: JobError | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    retry_delay_s: int | None = None
    release_message: bool = False  # hand the message back instead of deleting it
    # The attempt's word on the irreversible steps (None: as the record has them).
    checkpoints: list[Checkpoint] | None = None
    compensation: Compensation | None = None
    # The origin a navigation failure is about, when the worker knows it (the circuit
    # breakers charge it rather than the job's first goto's).
    failed_origin: str | None = None
    # A monitor's run compared with its baseline (succeeded runs only).
    changes: Changes | None = None
    # What the page's requests came to (options.block, route steps), kept with the attempt.
    metrics: RunMetrics | None = None
    # Each top-level step's time and cost, kept with the attempt (bounded: record_size).
    steps: list[StepTime] = field(default_factory=list)


def expired_error() -> JobError:
    return JobError(
        kind="expired", message="the job did not start before its deadline", timeout="deadline"
    )


def review_error(job: JobRecord, plan: ResumePlan, cause: JobError | None = None) -> JobError:
    """Why ``job`` waits in needs_review, and what its user can do about it."""
    why = plan.why
    if plan.resume is not Resume.REVIEW and plan.checkpoint is not None:
        # It could have been checked, but no attempt is left to run the check: its budget
        # is spent, or its workers stopped too often for it to run again (a dead letter).
        no_check = (
            "it is not run again"
            if cause is not None and cause.kind == "dead_lettered"
            else f"max_attempts ({job.request.max_attempts}) is spent"
        )
        why = (
            f"step {plan.checkpoint.step} ({plan.checkpoint.label}) {plan.checkpoint.state} on "
            f"attempt {plan.checkpoint.attempt} and {no_check} before its check could tell "
            "whether it took effect"
        )
    message = why or "the job stopped after an irreversible step"
    if cause is not None:
        message += f" (the attempt ended: {cause.message})"
    message += "; resolve it: POST /v1/jobs/{id}/resolve with outcome done or not_done"
    return JobError(
        kind="needs_review",
        message=message,
        step_index=plan.checkpoint.step if plan.checkpoint else None,
        step=plan.checkpoint.label if plan.checkpoint else None,
        timeout=cause.timeout if cause else None,
    )


def job_message(received: ReceivedMessage) -> JobMessage:
    if received.message is None:
        raise ValueError("not a job message")
    return received.message


def headline(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
