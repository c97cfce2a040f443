"""Job service: what the API (and the scheduler, sweeper, CLI admin) do with jobs.

Every function takes its AWS dependencies as parameters (``JobServices``); nothing here
reads the environment or talks to AWS on import.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pagefleet.adapters.dynamodb import CursorCodec, DynamoJobStore, IdempotencyConflict
from pagefleet.adapters.s3 import S3ArtifactStore
from pagefleet.adapters.sqs import SqsJobQueue
from pagefleet.errors import (
    EnqueueFailed,
    IdempotencyKeyReused,
    IllegalTransition,
    InvalidRequest,
    JobNotCancellable,
    NotFound,
)
from pagefleet.jobs.states import JobStatus
from pagefleet.models import JobMessage, JobRecord, JobRequest, iso, new_job_id, utcnow


@dataclass(frozen=True)
class JobServices:
    store: DynamoJobStore
    queue: SqsJobQueue
    artifacts: S3ArtifactStore
    cursors: CursorCodec


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
) -> Submitted:
    """Record a job as queued, then enqueue its message.

    The record is written first so that a job acknowledged to the client can always be
    found again: if the enqueue fails, a retry with the same Idempotency-Key (or the sweeper)
    sends the message.
    """
    fingerprint = request.fingerprint()
    if idempotency_key is not None:
        existing = _replay(svc, tenant_id, idempotency_key, fingerprint)
        if existing is not None:
            return existing

    now_dt = utcnow()
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
    try:
        svc.store.create(record, idempotency_fingerprint=fingerprint)
    except IdempotencyConflict:
        # A concurrent request with the same key won the race; answer with its job.
        assert idempotency_key is not None
        replay = _wait_for_replay(svc, tenant_id, idempotency_key, fingerprint)
        return replay
    return Submitted(job=enqueue(svc, record), created=True)


def enqueue(svc: JobServices, record: JobRecord) -> JobRecord:
    """Send the job's message and note that it is in the queue."""
    message = JobMessage.for_job(record)
    try:
        svc.queue.send(message)
    except Exception as exc:
        raise EnqueueFailed(
            "the job was recorded but could not be queued; retry with the same Idempotency-Key",
            job_id=record.job_id,
        ) from exc
    at = iso(utcnow())
    svc.store.mark_enqueued(record.tenant_id, record.job_id, at)
    return record.model_copy(update={"enqueued_at": at})


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
        job = enqueue(svc, job)
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
    start_key = svc.cursors.decode(tenant_id, cursor) if cursor else None
    jobs, last_key = svc.store.list_page(tenant_id, status=status, limit=limit, start_key=start_key)
    next_cursor = svc.cursors.encode(tenant_id, last_key) if last_key else None
    return JobPage(jobs=jobs, next_cursor=next_cursor)


def cancel_job(svc: JobServices, tenant_id: str, job_id: str) -> JobRecord:
    """Cancel a job: at once if it has not started, through its worker if it is running.

    A running job's worker reads the flag within a second, closes the job's browser context
    mid-action and records it ``cancelled`` with the artifacts taken so far.
    """
    for _ in range(3):  # the job may start or finish while we look at it
        job = svc.store.get(tenant_id, job_id)
        if job.status.is_final:
            raise JobNotCancellable(
                f"job {job_id} already ended as {job.status.value}", status=job.status.value
            )
        try:
            if job.status is JobStatus.RUNNING:
                return svc.store.request_cancel(tenant_id, job_id, at=iso(utcnow()))
            return svc.store.transition(tenant_id, job_id, JobStatus.CANCELLED, at=iso(utcnow()))
        except IllegalTransition:
            continue
    raise JobNotCancellable(f"job {job_id} kept changing state; retry the cancel")


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
    cutoff = iso(utcnow() - timedelta(seconds=older_than_s))
    count = 0
    for job in svc.store.list_unqueued(cutoff):
        if job.status is JobStatus.QUEUED and job.enqueued_at is None:
            try:
                enqueue(svc, job)
                count += 1
            except (EnqueueFailed, NotFound):
                continue
    return count
