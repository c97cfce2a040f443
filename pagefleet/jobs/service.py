"""Job service: what the API (and the scheduler, sweeper, CLI admin) do with jobs.

Every function takes its AWS dependencies as parameters (``JobServices``); nothing here
reads the environment or talks to AWS on import.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pagefleet.errors import (
    EnqueueFailed,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    RequestTooLarge,
)
from pagefleet.jobs.hooks import NO_HOOKS, JobHooks
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.jobs.limits import SUBMIT_RECORD_MAX_BYTES, json_bytes
from pagefleet.models import JobRecord, JobRequest, iso, new_job_id
from pagefleet.ports import SYSTEM_CLOCK, ArtifactStore, Clock, CursorCodec, JobQueue, JobStore
from pagefleet.states import JobStatus


@dataclass(frozen=True)
class JobServices:
    """What the job services need from the outside, as ports (adapters or fakes)."""

    store: JobStore
    queue: JobQueue
    artifacts: ArtifactStore
    cursors: CursorCodec
    clock: Clock = SYSTEM_CLOCK
    # The tenant limits' part in the lifecycle (``pagefleet.tenancy.gate``); none in tests
    # that do not need them.
    hooks: JobHooks = NO_HOOKS
    lifecycle: Lifecycle = field(init=False)

    def __post_init__(self) -> None:
        lifecycle = Lifecycle(self.store, self.queue, self.clock)
        lifecycle.hooks = self.hooks
        object.__setattr__(self, "lifecycle", lifecycle)


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
    request: JobRequest,
    *,
    idempotency_key: str | None = None,
    correlation_id: str | None = None,
    delay_s: int = 0,
) -> Submitted:
    """Record a job as queued, then enqueue its message (``delay_s``: visible that much later).

    The record is written first so that a job acknowledged to the client can always be
    found again: if the enqueue fails, a retry with the same Idempotency-Key (or the sweeper)
    sends the message.
    """
    fingerprint = request.fingerprint()
    if idempotency_key is not None:
        existing = _replay(svc, tenant_id, idempotency_key, fingerprint)
        if existing is not None:
            return existing

    now_dt = datetime.fromtimestamp(svc.clock.now(), UTC)
    if request.deadline is not None and request.deadline <= now_dt:
        raise InvalidRequest("deadline is in the past", field="deadline")
    now = iso(now_dt)
    record = JobRecord(
        tenant_id=tenant_id,
        job_id=new_job_id(),
        status=JobStatus.QUEUED,
        request=request,
        created_at=now,
        updated_at=now,
        correlation_id=correlation_id or str(uuid.uuid4()),
        pool=request.pool,
        idempotency_key=idempotency_key,
        deadline_at=int(request.deadline.timestamp()) if request.deadline else None,
    )
    _check_record_size(record)
    try:
        svc.store.create(record, idempotency_fingerprint=fingerprint)
    except IdempotencyConflict:
        # A concurrent request with the same key won the race; answer with its job.
        assert idempotency_key is not None
        replay = _wait_for_replay(svc, tenant_id, idempotency_key, fingerprint)
        return replay
    return Submitted(job=svc.lifecycle.enqueue(record, delay_s=delay_s), created=True)


def _check_record_size(record: JobRecord) -> None:
    """Refuse a job whose record would not fit in one item once its attempts have run."""
    size = json_bytes(record.model_dump(mode="json"))
    if size > SUBMIT_RECORD_MAX_BYTES:
        raise RequestTooLarge(
            f"the job's record would take {size} bytes, over the {SUBMIT_RECORD_MAX_BYTES} "
            "a job may use for its request; send fewer or smaller steps or inputs",
            field="body",
        )


def _replay(svc: JobServices, tenant_id: str, key: str, fingerprint: str) -> Submitted | None:
    idem = svc.store.get_idempotency(tenant_id, key)
    if idem is None:
        return None
    if idem.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was used with a different request body",
            job_id=idem.job_id,
        )
    job = svc.store.get(tenant_id, idem.job_id)
    if job.status is JobStatus.QUEUED and job.enqueued_at is None:
        # The first request recorded the job but did not get it queued: finish its work.
        job = svc.lifecycle.enqueue(job)
    return Submitted(job=job, created=False)


def _wait_for_replay(svc: JobServices, tenant_id: str, key: str, fingerprint: str) -> Submitted:
    # The winning transaction may not be visible for a moment if both raced inside DynamoDB.
    for delay in (0.0, 0.05, 0.1, 0.2, 0.4, 0.8):
        time.sleep(delay)
        replay = _replay(svc, tenant_id, key, fingerprint)
        if replay is not None:
            return replay
    raise EnqueueFailed("a request with this Idempotency-Key is still being processed; retry")


def get_job(svc: JobServices, tenant_id: str, job_id: str) -> JobRecord:
    return svc.store.get(tenant_id, job_id)


def list_jobs(
    svc: JobServices,
    tenant_id: str,
    *,
    status: JobStatus | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> JobPage:
    start_key = svc.cursors.decode(tenant_id, cursor, status=status) if cursor else None
    jobs, last_key = svc.store.list_page(tenant_id, status=status, limit=limit, start_key=start_key)
    next_cursor = svc.cursors.encode(tenant_id, last_key) if last_key else None
    return JobPage(jobs=jobs, next_cursor=next_cursor)


def cancel_job(svc: JobServices, tenant_id: str, job_id: str) -> JobRecord:
    """Cancel a job: at once if it has not started, through its worker if it is running.

    A running job's worker reads the flag within a second, closes the job's browser context
    mid-action and records it ``cancelled`` with the artifacts taken so far.
    """
    return svc.lifecycle.cancel(tenant_id, job_id)


def list_artifacts(
    svc: JobServices, tenant_id: str, job_id: str, *, ttl_seconds: int
) -> list[dict[str, Any]]:
    """Artifacts of a job with short presigned URLs, issued only after the tenant check."""
    job = svc.store.get(tenant_id, job_id)  # NotFound for another tenant's job
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
