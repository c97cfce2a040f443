"""The lifecycle's rules as values: one attempt budget, one lease arithmetic, one slack,
and what an attempt may do after an irreversible step started.

The store adapters and the lifecycle read these; nothing else restates them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from pagefleet.errors import DeadlinePassed, IllegalTransition, RetryNotDue
from pagefleet.jobs.checkpoints import Checkpoint, pending
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.states import HELD_STATES, JobStatus
from pagefleet.specs.resources import MAX_RECEIVE_COUNT

# SQS delays are whole seconds and clocks differ a little: a retry may start this early.
RETRY_DUE_SLACK_S = 2
# The record's lease ends this long before the visibility a message was received with, so a
# message that comes back after its worker died between claim and delete finds the lease
# expired and reclaims the job.
LEASE_MARGIN_S = 2
# How long past its due time a retry's message may be late before the sweeper re-sends it.
RETRY_GRACE_S = 120
# How long after its lease ran out a running job is taken back (by its pool's workers'
# lease watch, or the sweeper's minute): machines' clocks differ a little (NTP keeps them
# within milliseconds on AWS). A job's message is deleted once it is claimed, so the lease
# alone brings a dead worker's job back.
LEASE_GRACE_S = 1
# A job whose worker stopped this many times (leases lost since its last redrive) is
# dead-lettered rather than retried: it may be what kills its worker. SQS's maxReceiveCount
# counted these while a message stayed in flight for a whole run; the lease counts them now.
LEASES_LOST_LIMIT = MAX_RECEIVE_COUNT
# A waiting job is first looked at by the sweeper this long after it was made, then every
# WAITING_RECHECK_S (its parents' final transitions release it; this catches a missed one).
WAITING_FIRST_LOOK_S = 60
WAITING_RECHECK_S = 300
# SQS caps a message delay at 15 minutes and a visibility timeout at 12 hours.
MAX_DELAY_S = 900
MAX_VISIBILITY_S = 43_200


def attempt_allowed(job: JobRecord, attempt: int) -> bool:
    """THE attempt budget: may attempt number ``attempt`` of ``job`` run?

    Attempts count from the last redrive (a redriven job gets its whole budget back).
    Every decision asks this one question: whether a failed attempt is retried
    (``attempt + 1``), whether a reclaimed attempt may run (``attempt``), and whether the
    sweeper hands a dead worker's job to another attempt (``attempt + 1``).
    """
    return attempt - job.attempt_base <= job.request.max_attempts


def lease_ended_before(now: float) -> int:
    """Leases ending before this epoch second (exclusive) are over by ``LEASE_GRACE_S`` at
    ``now``: their jobs may be taken back."""
    return math.floor(now - LEASE_GRACE_S) + 1


def dead_worker_limit_reached(job: JobRecord) -> bool:
    """Would taking back ``job``'s lease once more reach ``LEASES_LOST_LIMIT``?"""
    return job.leases_lost + 1 >= LEASES_LOST_LIMIT


def lease_over(job: JobRecord, now: int) -> bool:
    """A running job whose worker's lease ended before ``now``: a claim may take it."""
    return job.status is JobStatus.RUNNING and (job.lease_expires_at or 0) < now


def gone(job: JobRecord, now: float) -> bool:
    """Past its retention at ``now``: gone to the API's readers, whether or not DynamoDB's
    TTL has deleted it yet ("typically within a few days", reads return it meanwhile)."""
    return job.expires_at is not None and job.expires_at <= now


def lost_lease_error(attempt: int) -> JobError:
    """What a job records when attempt ``attempt``'s worker stopped heartbeating: written by
    its take-back, or by the claim that took the job from it (the same write counts the
    lost lease)."""
    return JobError(
        kind="lease_expired",
        message=f"worker lost its lease on attempt {attempt} (it stopped heartbeating)",
        retryable=True,
        timeout="lease",
    )


def dead_worker_error() -> JobError:
    """Why a job whose workers stopped ``LEASES_LOST_LIMIT`` times is not run again."""
    return JobError(
        kind="dead_lettered",
        message=(
            f"its worker stopped {LEASES_LOST_LIMIT} times without finishing (the job "
            "may be what kills it); kept as a dead letter for an operator to redrive"
        ),
        retryable=True,
        timeout="lease",
    )


def reclaimed_at_limit(job: JobRecord) -> bool:
    """A job just claimed from a worker that stopped (the claim wrote ``lost_lease_error``
    and counted the lease) whose lost leases reached ``LEASES_LOST_LIMIT``: it must not run.

    Only a claim of a running job leaves this state: a take-back at the limit dead-letters
    the job instead of retrying it, and a redrive or a resolution clears the error.
    """
    return job.leases_lost >= LEASES_LOST_LIMIT and job.error == lost_lease_error(job.attempt - 1)


def another_carries_it(job: JobRecord, message_id: str, now: float) -> bool:
    """Whether a deferred job waits in a successor message other than this one: named once
    it was sent, and not visible yet. Its other messages (a second copy of one, as SQS
    delivers some twice, and each successor such a copy would send) are dropped until then;
    the successor itself, and any message once it is due, are looked at as before. Only a
    sent message is named, so the job always has one."""
    return (
        job.deferred_to is not None
        and job.deferred_due is not None
        and message_id != job.deferred_to
        and now < job.deferred_due
    )


def lease_until(now: float, lease_seconds: int) -> int:
    """The record's lease end for a claim or heartbeat at ``now``."""
    return int(now) + lease_seconds - LEASE_MARGIN_S


@dataclass(frozen=True)
class LeaseRenewal:
    """A fenced write that also renews its attempt's lease: refused (``LeaseLost``) when the
    lease had already ended at ``now`` (the writer's clock, epoch seconds), though no other
    attempt took the job yet; else the lease runs to ``until`` from the same write.

    An irreversible step's ``started`` is written so: the fence on (attempt, owner) alone let
    a worker whose heartbeats had failed past its lease start the step just before a take-back,
    and the next attempt's check could then run before that step's click reached the site.
    """

    now: int
    until: int

    @classmethod
    def at(cls, now: float, lease_seconds: int) -> LeaseRenewal:
        return cls(int(now), lease_until(now, lease_seconds))


def claim_refusal(job: JobRecord, now: int) -> IllegalTransition:
    """Why a claim of ``job`` at ``now`` was refused, as the error that says what to do."""
    if (
        job.status not in HELD_STATES
        and job.deadline_at is not None
        and job.deadline_at < now
        and not job.status.is_final
    ):
        return DeadlinePassed(
            f"job {job.job_id} was not started before its deadline", status=job.status.value
        )
    if (
        job.status is JobStatus.RETRY_SCHEDULED
        and job.retry_at is not None
        and job.retry_at > now + RETRY_DUE_SLACK_S
    ):
        return RetryNotDue(
            f"job {job.job_id} retries at {job.retry_at}, not yet", retry_at=job.retry_at
        )
    if (
        job.status is JobStatus.SCHEDULED
        and job.run_at is not None
        and job.run_at > now + RETRY_DUE_SLACK_S
    ):
        return RetryNotDue(f"job {job.job_id} starts at {job.run_at}, not yet", retry_at=job.run_at)
    refused = IllegalTransition(
        f"job {job.job_id} is {job.status.value}, cannot start it", status=job.status.value
    )
    refused.seen = job  # its claimer decides from it (a copy, a job waiting for a person...)
    return refused


# --- irreversible steps (docs/irreversible-steps.md) ------------------------------------------
class Resume(StrEnum):
    """What a new attempt does first, given what earlier attempts recorded."""

    START = "start"  # no effect at stake: the workflow from its first step
    CHECK = "check"  # the step's check first; then on after it, or from the start
    CONTINUE = "continue"  # a person said the step took effect: on after it
    REVIEW = "review"  # nobody can tell without a person: needs_review
    COMPENSATED = "compensated"  # failed and compensated; only the ending was not written


@dataclass(frozen=True)
class ResumePlan:
    resume: Resume
    checkpoint: Checkpoint | None = None  # the irreversible step at stake
    why: str = ""  # REVIEW: what a person must decide; COMPENSATED: the failure


def resume_plan(job: JobRecord, checkpoints: list[Checkpoint] | None = None) -> ResumePlan:
    """THE rule for an attempt after one that reached an irreversible step: never run it
    again blindly. ``checkpoints``: the attempt's own view (default: the record's)."""
    compensation = job.compensation
    resolved_since = (
        job.resolution is not None
        and compensation is not None
        and job.resolution.at >= compensation.at
    )
    if compensation is not None and not resolved_since:
        if compensation.state == "done":
            return ResumePlan(Resume.COMPENSATED, why=compensation.reason)
        return ResumePlan(
            Resume.REVIEW,
            why=(
                f"the compensation of attempt {compensation.attempt} "
                + ("failed" if compensation.state == "failed" else "did not finish")
                + "; whether it undid the effect is unknown"
            ),
        )
    at_stake = pending(job.checkpoints if checkpoints is None else checkpoints)
    if at_stake is None:
        return ResumePlan(Resume.START)
    name = f"step {at_stake.step} ({at_stake.label})"
    if at_stake.state == "done" and at_stake.how == "resolved":
        return ResumePlan(Resume.CONTINUE, at_stake)
    if at_stake.state == "unknown":
        return ResumePlan(Resume.REVIEW, at_stake, f"whether {name} took effect is unknown")
    if job.request.steps[at_stake.step].check is not None:
        return ResumePlan(Resume.CHECK, at_stake)
    how = "started" if at_stake.state == "started" else "ran"
    return ResumePlan(
        Resume.REVIEW,
        at_stake,
        f"{name} {how} on attempt {at_stake.attempt} and the job did not end there; "
        "it has no check, so running it again could do it twice",
    )


def after_lost_run(job: JobRecord, *, retry_allowed: bool) -> JobStatus | None:
    """Where a job goes when its attempt ended without its worker (a dead worker's job
    taken back, a dead letter, a reclaim with no attempt left). None: as any job."""
    plan = resume_plan(job)
    if plan.resume is Resume.START:
        return None
    if plan.resume is Resume.COMPENSATED:
        return JobStatus.FAILED
    if plan.resume in (Resume.CHECK, Resume.CONTINUE) and retry_allowed:
        return JobStatus.RETRY_SCHEDULED
    return JobStatus.NEEDS_REVIEW


def after_failed_attempt(
    job: JobRecord, checkpoints: list[Checkpoint], error: JobError, *, retry_allowed: bool
) -> JobStatus | None:
    """Where a job goes when its attempt failed after reaching an irreversible step.

    None: no effect at stake, retry or fail as any job. A failure that says the site may
    not have answered (retryable, or a timeout) is looked into by the next attempt's check,
    else by a person; any other failure after the step took effect fails the job (and its
    ``compensate`` runs).
    """
    at_stake = pending(checkpoints)
    if at_stake is None:
        return None
    unsure = error.retryable or error.timeout is not None
    if at_stake.state == "done" and not unsure:
        return JobStatus.FAILED
    plan = resume_plan(job, checkpoints)
    if plan.resume in (Resume.CHECK, Resume.CONTINUE) and retry_allowed:
        return JobStatus.RETRY_SCHEDULED
    return JobStatus.NEEDS_REVIEW
