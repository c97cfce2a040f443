"""Job service: what the API (and the scheduler, sweeper, CLI admin) do with jobs.

Every function takes its AWS dependencies as parameters (``JobServices``); nothing here
reads the environment or talks to AWS on import.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pagefleet.background import Background
from pagefleet.backoff import Backoff, Jitter
from pagefleet.errors import (
    EnqueueFailed,
    IdempotencyConflict,
    IdempotencyKeyReused,
    NotFound,
)
from pagefleet.jobs import stats
from pagefleet.jobs.hooks import NO_HOOKS, JobHooks
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.jobs.models import JobRequest, epoch_of_iso, iso
from pagefleet.jobs.planning import Problems, plan_job
from pagefleet.jobs.ports import (
    NO_FILTER,
    SYSTEM_CLOCK,
    ArtifactStore,
    Clock,
    CursorCodec,
    JobFilter,
    JobQueue,
    JobStore,
)
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import MAX_DELAY_S, gone
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission
from pagefleet.jobs.submit_policy import STRICT, SubmitPolicy
from pagefleet.workflow.versions import WorkflowStore

log = logging.getLogger("pagefleet.jobs")


@dataclass(frozen=True)
class JobServices:
    """What the job services need from the outside, as ports (adapters or fakes), with the
    lifecycle over the job store and queue, and the submission policy every job is planned
    under. Built whole (``JobServices.of``), never changed: a process keeps one for its life
    and every caller shares it."""

    lifecycle: Lifecycle
    artifacts: ArtifactStore
    cursors: CursorCodec
    workflows: WorkflowStore | None = None
    policy: SubmitPolicy = STRICT

    @classmethod
    def of(
        cls,
        store: JobStore,
        queue: JobQueue,
        artifacts: ArtifactStore,
        cursors: CursorCodec,
        *,
        clock: Clock = SYSTEM_CLOCK,
        workflows: WorkflowStore | None = None,
        hooks: JobHooks = NO_HOOKS,
        policy: SubmitPolicy = STRICT,
    ) -> JobServices:
        """``hooks``: the tenant limits' part in the lifecycle (``pagefleet.tenancy.gate``);
        none in tests that do not need them. ``policy``: what a job may ask for (the
        default: no loopback webhooks, no tenant may evaluate)."""
        lifecycle = Lifecycle(store, queue, clock, hooks=hooks)
        return cls(lifecycle, artifacts, cursors, workflows, policy)

    @property
    def store(self) -> JobStore:
        return self.lifecycle.store

    @property
    def queue(self) -> JobQueue:
        return self.lifecycle.queue

    @property
    def clock(self) -> Clock:
        return self.lifecycle.clock


@dataclass(frozen=True)
class Submitted:
    job: JobRecord
    created: bool  # False when an Idempotency-Key replay returned the existing job


@dataclass(frozen=True)
class JobPage:
    jobs: list[JobRecord]
    next_cursor: str | None


def submit_job(
    svc: JobServices,
    tenant_id: str,
    submission: JobSubmission | JobRequest,
    *,
    idempotency_key: str | None = None,
    correlation_id: str | None = None,
    schedule: tuple[str, str] | None = None,
    delay_s: int = 0,
    alongside: Callable[[JobRecord], object] | None = None,
) -> Submitted:
    """Record a job in its first state, then send it on its way (a queued job's message
    visible ``delay_s`` later). ``alongside``: work that needs the job recorded (a browser
    session's audit record), started once it is and run while it is queued; waited for
    before this returns or raises (pagefleet.background), its failure logged, never the
    submission's.

    The record is written first so that a job acknowledged to the client can always be
    found again: if its message cannot be sent, a retry with the same Idempotency-Key (or
    the sweeper) sends it. A delayed job waits ``scheduled``; one with parents waits
    ``waiting`` until they have all succeeded. ``schedule`` is (schedule id, scheduled time)
    of the schedule that made the job.
    """
    fingerprint = submission.fingerprint()
    if idempotency_key is not None:
        existing = _replay(svc, tenant_id, idempotency_key, fingerprint)
        if existing is not None:
            return existing
    planned = plan_job(
        svc,
        tenant_id,
        submission,
        Problems(collect=False),
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        schedule=schedule,
    )
    assert planned is not None  # a problem was raised
    record, dispatch_at = planned.record, planned.dispatch_at
    try:
        svc.store.create(record, idempotency_fingerprint=fingerprint, dispatch_at=dispatch_at)
    except IdempotencyConflict:
        # A concurrent request with the same key won the race; answer with its job.
        assert idempotency_key is not None
        replay = _wait_for_replay(svc, tenant_id, idempotency_key, fingerprint)
        return replay
    beside = Background(alongside, record) if alongside is not None else None
    try:
        return _send_on(svc, record, dispatch_at, delay_s)
    finally:
        failed = beside.failure() if beside is not None else None
        if failed is not None:
            log.warning("work alongside job %s failed: %s", record.job_id, failed)


def _send_on(
    svc: JobServices, record: JobRecord, dispatch_at: int | None, delay_s: int
) -> Submitted:
    """A recorded job on its way: released by its parents, dispatched later, or queued."""
    tenant_id, status = record.tenant_id, record.status
    if status is JobStatus.WAITING:
        # Parents that already ended settle it now; the others release it when they end.
        if svc.lifecycle.settle_waiting(tenant_id, record.job_id) is not None:
            record = svc.store.get(tenant_id, record.job_id)
        return Submitted(job=record, created=True)
    if dispatch_at is not None:
        return Submitted(job=record, created=True)
    return Submitted(job=svc.lifecycle.enqueue(record, delay_s=delay_s), created=True)


def _replay(svc: JobServices, tenant_id: str, key: str, fingerprint: str) -> Submitted | None:
    idem = svc.store.get_idempotency(tenant_id, key, now=svc.clock.now())
    if idem is None:
        return None
    if idem.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was used with a different request body",
            job_id=idem.job_id,
        )
    job = svc.store.get(tenant_id, idem.job_id)
    near = job.run_at is None or job.run_at - int(svc.clock.now()) <= MAX_DELAY_S
    if job.status in (JobStatus.QUEUED, JobStatus.SCHEDULED) and job.enqueued_at is None and near:
        # The first request recorded the job but did not get it queued: finish its work.
        job = svc.lifecycle.enqueue(job)
    return Submitted(job=job, created=False)


# The winning request's writes become visible within moments: look again at once, then
# after 50 ms doubling to 0.8 s. No jitter: this waits for one write, not against peers.
REPLAY_BACKOFF = Backoff(0.05, 0.8, Jitter.NONE)
REPLAY_TRIES = 6


def _wait_for_replay(svc: JobServices, tenant_id: str, key: str, fingerprint: str) -> Submitted:
    # The winning transaction may not be visible for a moment if both raced inside DynamoDB.
    for delay in REPLAY_BACKOFF.ladder(REPLAY_TRIES):
        time.sleep(delay)
        replay = _replay(svc, tenant_id, key, fingerprint)
        if replay is not None:
            return replay
    raise EnqueueFailed("a request with this Idempotency-Key is still being processed; retry")


def get_job(svc: JobServices, tenant_id: str, job_id: str, *, consistent: bool = True) -> JobRecord:
    """The tenant's job; NotFound once past its retention (``rules.gone``)."""
    job = svc.store.get(tenant_id, job_id, consistent=consistent)
    if gone(job, svc.clock.now()):
        raise NotFound(f"job {job_id} not found", job_id=job_id)
    return job


def list_jobs(
    svc: JobServices,
    tenant_id: str,
    *,
    status: JobStatus | None = None,
    limit: int = 20,
    cursor: str | None = None,
    where: JobFilter = NO_FILTER,
) -> JobPage:
    """Newest first. With filters besides the status a page may be short, even empty, and
    still have a next cursor: the listing reads a bounded number of jobs a request."""
    start = svc.cursors.decode(tenant_id, cursor, status=status, where=where) if cursor else None
    jobs, last_key = svc.store.list_page(
        tenant_id, status=status, limit=limit, start_key=start, where=where
    )
    next_cursor = svc.cursors.encode(tenant_id, last_key, where=where) if last_key else None
    now = svc.clock.now()
    return JobPage(jobs=[j for j in jobs if not gone(j, now)], next_cursor=next_cursor)


def cancel_job(svc: JobServices, tenant_id: str, job_id: str) -> JobRecord:
    """Cancel a job: at once if it has not started, through its worker if it is running.

    A running job's worker reads the flag within a second, closes the job's browser context
    mid-action and records it ``cancelled`` with the artifacts taken so far.
    """
    return svc.lifecycle.cancel(tenant_id, job_id)


def resolve_job(
    svc: JobServices,
    tenant_id: str,
    job_id: str,
    outcome: Literal["done", "not_done"],
    *,
    go_on: bool,
    by: str,
) -> JobRecord:
    """A person's word on a job in needs_review (see ``Lifecycle.resolve``)."""
    return svc.lifecycle.resolve(tenant_id, job_id, outcome, go_on=go_on, by=by)


def continue_job(svc: JobServices, tenant_id: str, job_id: str, *, note: str | None) -> JobRecord:
    """The owner's answer to a job waiting_for_human (see ``Lifecycle.continue_waiting``)."""
    return svc.lifecycle.continue_waiting(tenant_id, job_id, note=note)


def list_artifacts(
    svc: JobServices, tenant_id: str, job_id: str, *, ttl_seconds: int
) -> list[dict[str, Any]]:
    """Artifacts of a job with short presigned URLs, issued only after the tenant check."""
    job = get_job(svc, tenant_id, job_id)  # NotFound for another tenant's job, or a gone one
    out = []
    for artifact in job.artifacts:
        out.append(
            {
                "name": artifact.name,
                "size": artifact.size,
                "content_type": artifact.content_type,
                "sha256": artifact.sha256,
                "retention": artifact.retention,
                "attempt": artifact.attempt,
                "url": svc.artifacts.presign_get(artifact.key, ttl_seconds),
                "expires_in": ttl_seconds,
            }
        )
    return out


def requeue_unqueued(svc: JobServices, *, older_than_s: int = 60) -> int:
    """Sweeper duty: enqueue jobs recorded as queued whose message never reached the queue.

    Only jobs older than ``older_than_s`` are touched, so a submission still in flight is
    left to finish its own enqueue.
    """
    cutoff = iso(datetime.fromtimestamp(svc.clock.now() - older_than_s, UTC))
    count = 0
    for job in svc.store.list_unqueued(cutoff):
        if job.status is JobStatus.QUEUED and job.enqueued_at is None:
            try:
                svc.lifecycle.enqueue(job)
                count += 1
            except (EnqueueFailed, NotFound):
                continue
    return count


def fleet_stats(
    svc: JobServices, tenant_id: str, *, window_s: int = stats.DEFAULT_WINDOW_S
) -> stats.FleetStats:
    """The tenant's fleet figures (see ``pagefleet.jobs.stats``)."""
    now = svc.clock.now()
    counts = {s: svc.store.count(tenant_id, s) for s in stats.LIVE_STATES}
    jobs: list[JobRecord] = []
    start: dict[str, Any] | None = None
    while len(jobs) < stats.SAMPLE:
        page, start = svc.store.list_page(tenant_id, status=None, limit=100, start_key=start)
        jobs += page
        if not start or (page and _epoch(page[-1].created_at) < now - window_s):
            break
    return stats.fleet_stats(
        jobs[: stats.SAMPLE], counts, now, window_s, oldest_waiting_since(svc, tenant_id, now)
    )


def oldest_waiting_since(svc: JobServices, tenant_id: str, now: float) -> float | None:
    """Since when the tenant's oldest job waiting to start has waited: the oldest queued job
    since it was queued, or a retry (a dead worker's job taken back, say) since it was due.
    Running jobs never count: on AWS the queues' ApproximateAgeOfOldestMessage, which
    scaling and the age alarm read, sees the same jobs (a claimed job's message is gone)."""
    since: list[float] = []
    oldest = svc.store.oldest(tenant_id, JobStatus.QUEUED)
    if oldest is not None:
        since.append(_epoch(oldest.enqueued_at or oldest.created_at))
    retries, _ = svc.store.list_page(
        tenant_id, status=JobStatus.RETRY_SCHEDULED, limit=100, start_key=None
    )
    since += [float(j.retry_at) for j in retries if j.retry_at is not None and j.retry_at <= now]
    return min(since, default=None)


def _epoch(stamp: str) -> float:
    return epoch_of_iso(stamp)
