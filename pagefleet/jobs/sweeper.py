"""What keeps jobs from being lost: dead letters, redrive, and the sweeper's minute.

These functions find the jobs to look at (the sparse ``ops`` index); every move they make
is a lifecycle move, so each is idempotent and safe to run twice at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagefleet.errors import NotFound
from pagefleet.jobs.models import JobRecord
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.rules import LEASE_GRACE_S, RETRY_GRACE_S, WAITING_RECHECK_S
from pagefleet.jobs.service import JobServices, requeue_unqueued
from pagefleet.jobs.states import JobStatus


def mark_dead_lettered(svc: JobServices, received: ReceivedMessage) -> str:
    """Record why a message landed in the DLQ. Returns what happened, for logs and tests."""
    return svc.lifecycle.dead_letter(received)


def list_dead_letters(svc: JobServices, limit: int = 100) -> list[JobRecord]:
    out: list[JobRecord] = []
    for tenant_id, job_id in svc.store.ops_due("dead", svc.lifecycle.now() + 1, limit=limit):
        try:
            job = svc.store.get(tenant_id, job_id)
        except NotFound:
            continue
        if job.status is JobStatus.DEAD_LETTERED:
            out.append(job)
    return out


def redrive(svc: JobServices, jobs: list[tuple[str, str]]) -> list[str]:
    """Send dead-lettered jobs back to their queue with a fresh retry budget."""
    return [job_id for tenant_id, job_id in jobs if svc.lifecycle.redrive(tenant_id, job_id)]


@dataclass
class SweepReport:
    enqueued: int = 0
    expired: int = 0
    leases_recovered: int = 0
    leases_failed: int = 0
    leases_to_review: int = 0  # an irreversible step started and cannot be checked
    retries_resent: int = 0
    scheduled_dispatched: int = 0
    waiting_settled: int = 0


def sweep(svc: JobServices) -> SweepReport:
    """The sweeper's minute: nothing queued is left out of the queue, nothing waits forever."""
    lifecycle = svc.lifecycle
    report = SweepReport()
    report.enqueued = requeue_unqueued(svc)
    now = lifecycle.now()

    for tenant_id, job_id in svc.store.ops_due("deadline", now):
        report.expired += lifecycle.expire(tenant_id, job_id)

    for tenant_id, job_id in svc.store.ops_due("lease", now - LEASE_GRACE_S):
        outcome = lifecycle.take_back(tenant_id, job_id, expired_before=now - LEASE_GRACE_S)
        report.leases_recovered += outcome == "requeued"
        report.leases_failed += outcome == "failed"
        report.leases_to_review += outcome == "needs_review"

    for tenant_id, job_id in svc.store.ops_due("retry", now - RETRY_GRACE_S):
        report.retries_resent += lifecycle.resend_retry(
            tenant_id, job_id, look_again_at=now + RETRY_GRACE_S
        )

    # Scheduled jobs whose start is now within SQS's 15-minute delay: send them.
    for tenant_id, job_id in svc.store.ops_due("due", now + 1):
        report.scheduled_dispatched += lifecycle.dispatch_due(tenant_id, job_id)

    # Waiting jobs whose release a parent's final transition should have driven.
    for tenant_id, job_id in svc.store.ops_due("waiting", now + 1):
        if lifecycle.settle_waiting(tenant_id, job_id) is not None:
            report.waiting_settled += 1
        else:
            svc.store.recheck_waiting(tenant_id, job_id, due=now + WAITING_RECHECK_S)
    return report
