"""What keeps jobs from being lost: dead letters, redrive, dead workers' leases, and the
sweeper's minute.

These functions find the jobs to look at (the sparse ``ops`` index); every move they make
is a lifecycle move, so each is idempotent and safe to run twice at once. A dead worker's
job is taken back by ``take_back_expired``, which each worker runs for its own pool when
the next lease it knows of ends (``browser_task.slot.leases``) and the sweeper runs every
minute for every pool (the backstop when no worker of a pool is alive).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagefleet.errors import NotFound
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import (
    RETRY_GRACE_S,
    WAITING_RECHECK_S,
    gone,
    lease_ended_before,
)
from pagefleet.jobs.service import JobServices, requeue_unqueued
from pagefleet.jobs.states import JobStatus


def mark_dead_lettered(svc: JobServices, received: ReceivedMessage) -> str:
    """Record why a message landed in the DLQ. Returns what happened, for logs and tests."""
    return svc.lifecycle.dead_letter(received)


def list_dead_letters(svc: JobServices, limit: int = 100) -> list[JobRecord]:
    """Dead-lettered jobs of every tenant, but those past their tenant's retention (gone,
    though TTL may not have deleted them yet)."""
    out: list[JobRecord] = []
    now = svc.lifecycle.now()
    for tenant_id, job_id in svc.store.ops_due("dead", now + 1, limit=limit):
        try:
            job = svc.store.get(tenant_id, job_id)
        except NotFound:
            continue
        if job.status is JobStatus.DEAD_LETTERED and not gone(job, now):
            out.append(job)
    return out


def redrive(svc: JobServices, jobs: list[tuple[str, str]]) -> list[str]:
    """Send the named dead-lettered jobs back to their queue with a fresh retry budget. A job
    past its retention stays as it is: its artifacts may be gone already, and TTL would
    delete the record under the new run."""
    now = svc.lifecycle.now()
    found = []
    for tenant_id, job_id in jobs:
        try:
            found.append(svc.store.get(tenant_id, job_id))
        except NotFound:
            continue
    return redrive_listed(svc, [job for job in found if not gone(job, now)])


def redrive_listed(svc: JobServices, jobs: list[JobRecord]) -> list[str]:
    """``redrive`` of jobs read and kept already (``list_dead_letters``'s)."""
    return [job.job_id for job in jobs if svc.lifecycle.redrive(job.tenant_id, job.job_id)]


@dataclass
class TakeBacks:
    """What became of the jobs whose lease ran out."""

    requeued: int = 0
    failed: int = 0
    dead_lettered: int = 0
    to_review: int = 0  # an irreversible step started and cannot be checked
    jobs: list[str] = field(default_factory=list)  # the ids of those moved here
    # Of those, browser sessions: never retried, so each is lost to its caller (counted as
    # BrowserSessionsLost by whoever took it back: the lost-sessions alarm reads them all).
    sessions_lost: int = 0


# What ``Lifecycle.take_back`` answers for a job it moved out of running.
LOST_OUTCOMES = frozenset({"requeued", "failed", "dead_lettered", "needs_review"})


def session_lost(job: JobRecord, outcome: str) -> bool:
    """Whether taking ``job`` back (``Lifecycle.take_back``'s ``outcome``) lost a session:
    a browser's state cannot be carried to another attempt, so any move out of running is."""
    return job.request.session is not None and outcome in LOST_OUTCOMES


def take_back_expired(svc: JobServices, *, now: float, pool: str | None = None) -> TakeBacks:
    """Every running job (of ``pool``, or of all pools) whose lease ran out at least
    ``LEASE_GRACE_S`` ago: retried ahead of its queue, failed when its attempts are spent,
    dead-lettered when workers stopped on it too often."""
    before = lease_ended_before(now)
    out = TakeBacks()
    for tenant_id, job_id in svc.store.ops_due("lease", before):
        try:
            job = svc.store.get(tenant_id, job_id)
        except NotFound:
            continue
        outcome = svc.lifecycle.take_back_job(job, expired_before=before, pool=pool)
        out.requeued += outcome == "requeued"
        out.failed += outcome == "failed"
        out.dead_lettered += outcome == "dead_lettered"
        out.to_review += outcome == "needs_review"
        out.sessions_lost += session_lost(job, outcome)
        if outcome in LOST_OUTCOMES:
            out.jobs.append(job_id)
    return out


@dataclass
class SweepReport:
    enqueued: int = 0
    expired: int = 0
    leases_recovered: int = 0
    leases_failed: int = 0
    leases_dead_lettered: int = 0
    leases_to_review: int = 0  # an irreversible step started and cannot be checked
    taken_back: list[str] = field(default_factory=list)  # the jobs of those four
    sessions_lost: int = 0  # browser sessions among them (TakeBacks.sessions_lost)
    retries_resent: int = 0
    scheduled_dispatched: int = 0
    waiting_settled: int = 0
    # Seconds since the oldest lease still held by a running job ended, after this sweep's
    # take-backs (0: none is over). The claim deleted the job's message, so nothing else
    # shows a take-back that keeps failing: the alarm on this does (infra/constructs/alarms.py).
    oldest_expired_lease_s: int = 0


def oldest_expired_lease_s(svc: JobServices, *, now: float) -> int:
    """How long ago the earliest lease of a still-running job ended (0: none has)."""
    earliest = svc.store.next_due("lease", 0)
    if earliest is None or earliest >= now:
        return 0
    return int(now) - earliest


def sweep(svc: JobServices) -> SweepReport:
    """The sweeper's minute: nothing queued is left out of the queue, nothing waits forever."""
    lifecycle = svc.lifecycle
    report = SweepReport()
    report.enqueued = requeue_unqueued(svc)
    now = lifecycle.now()

    for tenant_id, job_id in svc.store.ops_due("deadline", now):
        report.expired += lifecycle.expire(tenant_id, job_id)

    taken = take_back_expired(svc, now=svc.clock.now())
    report.leases_recovered = taken.requeued
    report.leases_failed = taken.failed
    report.leases_dead_lettered = taken.dead_lettered
    report.leases_to_review = taken.to_review
    report.taken_back = taken.jobs
    report.sessions_lost = taken.sessions_lost
    report.oldest_expired_lease_s = oldest_expired_lease_s(svc, now=svc.clock.now())

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
