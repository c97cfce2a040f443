"""What keeps jobs from being lost: dead letters, redrive, and the sweeper's duties.

Every function here is idempotent and safe to run twice at once: each move is a
conditional write, and a duplicate message is harmless because claims are conditional.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagefleet.adapters.sqs import ReceivedMessage
from pagefleet.errors import IllegalTransition, NotFound
from pagefleet.jobs.service import JobServices, enqueue, requeue_unqueued
from pagefleet.jobs.states import JobStatus
from pagefleet.models import JobError, JobMessage, JobRecord, iso, utcnow

# How long past its due time a retry's message may be late before the sweeper re-sends it.
RETRY_GRACE_S = 120
# How long after its lease ran out a running job is taken back (the SQS message normally
# comes back on its own at the same time; this is the backstop).
LEASE_GRACE_S = 60


def mark_dead_lettered(svc: JobServices, received: ReceivedMessage) -> str:
    """Record why a message landed in the DLQ. Returns what happened, for logs and tests."""
    message = received.message
    if message is None:
        # Not a job message: nothing to mark; the body is logged by the caller (no job data).
        return "poison"
    try:
        current = svc.store.get(message.tenant_id, message.job_id)
    except NotFound:
        return "unknown_job"
    if current.status is JobStatus.RUNNING and (current.lease_expires_at or 0) >= int(
        utcnow().timestamp()
    ):
        # A worker holds a live lease: this was a stale duplicate of the job's message.
        return "alive"
    reason = JobError(
        kind="dead_lettered",
        message=(
            f"the job's message was received {received.receive_count} times without "
            "finishing; it was moved to the dead-letter queue"
        ),
        retryable=True,
    )
    try:
        svc.store.transition(
            message.tenant_id,
            message.job_id,
            JobStatus.DEAD_LETTERED,
            at=iso(utcnow()),
            error=reason,
        )
    except NotFound:
        return "unknown_job"
    except IllegalTransition:
        return "already_final"  # finished (or already dead-lettered) before the DLQ saw it
    return "marked"


def list_dead_letters(svc: JobServices, limit: int = 100) -> list[JobRecord]:
    out: list[JobRecord] = []
    now = int(utcnow().timestamp()) + 1
    for tenant_id, job_id in svc.store.ops_due("dead", now, limit=limit):
        try:
            job = svc.store.get(tenant_id, job_id)
        except NotFound:
            continue
        if job.status is JobStatus.DEAD_LETTERED:
            out.append(job)
    return out


def redrive(svc: JobServices, jobs: list[tuple[str, str]]) -> list[str]:
    """Send dead-lettered jobs back to their queue with a fresh retry budget."""
    redriven = []
    for tenant_id, job_id in jobs:
        try:
            job = svc.store.transition(tenant_id, job_id, JobStatus.QUEUED, at=iso(utcnow()))
        except (IllegalTransition, NotFound):
            continue
        enqueue(svc, job.model_copy(update={"enqueued_at": None}))
        redriven.append(job_id)
    return redriven


@dataclass
class SweepReport:
    enqueued: int = 0
    expired: int = 0
    leases_recovered: int = 0
    leases_failed: int = 0
    retries_resent: int = 0


def sweep(svc: JobServices) -> SweepReport:
    """The sweeper's minute: nothing queued is left out of the queue, nothing waits forever."""
    report = SweepReport()
    report.enqueued = requeue_unqueued(svc)
    now = int(utcnow().timestamp())

    for tenant_id, job_id in svc.store.ops_due("deadline", now):
        try:
            svc.store.transition(
                tenant_id,
                job_id,
                JobStatus.EXPIRED,
                at=iso(utcnow()),
                error=JobError(
                    kind="expired",
                    message="the job did not start before its deadline",
                    timeout="deadline",
                ),
            )
            report.expired += 1
        except (IllegalTransition, NotFound):
            continue

    for tenant_id, job_id in svc.store.ops_due("lease", now - LEASE_GRACE_S):
        outcome = _take_back_expired_lease(svc, tenant_id, job_id, now)
        if outcome == "requeued":
            report.leases_recovered += 1
        elif outcome == "failed":
            report.leases_failed += 1

    for tenant_id, job_id in svc.store.ops_due("retry", now - RETRY_GRACE_S):
        try:
            job = svc.store.get(tenant_id, job_id)
        except NotFound:
            continue
        if job.status is not JobStatus.RETRY_SCHEDULED:
            continue
        _send(svc, job)
        svc.store.postpone_retry(tenant_id, job_id, due=now + RETRY_GRACE_S)
        report.retries_resent += 1
    return report


def _take_back_expired_lease(svc: JobServices, tenant_id: str, job_id: str, now: int) -> str:
    try:
        job = svc.store.get(tenant_id, job_id)
    except NotFound:
        return "gone"
    if job.status is not JobStatus.RUNNING or (job.lease_expires_at or 0) >= now - LEASE_GRACE_S:
        return "alive"
    error = JobError(
        kind="lease_expired",
        message=f"worker lost its lease on attempt {job.attempt} (it stopped heartbeating)",
        retryable=True,
        timeout="lease",
    )
    out_of_attempts = job.attempts_used >= job.request.max_attempts
    target = JobStatus.FAILED if out_of_attempts else JobStatus.RETRY_SCHEDULED
    try:
        moved = svc.store.transition(
            tenant_id,
            job_id,
            target,
            at=iso(utcnow()),
            error=error,
            lease_expired_before=now - LEASE_GRACE_S,
            retry_at=now,
        )
    except IllegalTransition:
        return "alive"  # heartbeat came back, or another sweeper got there first
    if target is JobStatus.FAILED:
        return "failed"
    _send(svc, moved)
    return "requeued"


def _send(svc: JobServices, job: JobRecord) -> None:
    svc.queue.send(JobMessage.for_job(job))
