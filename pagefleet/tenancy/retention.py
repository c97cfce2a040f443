"""What a tenant's data lives for, and how it is deleted on request.

- A job record (and what is kept under it) expires ``retention_days`` after the job ended.
  A worker writes ``expires_at`` (DynamoDB's TTL attribute) with the attempt's outcome; for
  every other end (a cancel, an expiry, the sweeper, a dead letter, a job going to review)
  the jobs stream's ``RetentionConsumer`` writes it, and removes it when a dead letter is
  redriven or a job in review is resolved to run again. A job still waiting or running never
  expires, however far ahead it is scheduled.
- Idempotency keys expire after 24 h (written with the key, ``IDEMPOTENCY_TTL_S``).
- ``delete_job`` honours a deletion request: the job's artifacts of every attempt, then its
  record and everything kept under it (events, its idempotency key). A running job is
  cancelled first; if it does not stop within a few seconds, the deletion finishes when it
  does (the consumer sees it end with ``delete_requested_at`` set).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pagefleet.errors import JobNotCancellable, NotFound
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import AWAITING_A_PERSON, JobStatus
from pagefleet.tenancy.limits import TenantLimits

log = logging.getLogger("pagefleet.tenancy")

# How long DELETE waits for a running job to stop before answering "deleting".
STOP_WAIT_S = 8.0
STOP_POLL_S = 0.25


class JobData(Protocol):
    """Where a job's data lives beyond the record the job store handles."""

    def delete_artifacts(self, tenant_id: str, job_id: str) -> int: ...

    def delete_items(self, tenant_id: str, job_id: str, idempotency_key: str | None) -> int: ...

    def request_delete(self, tenant_id: str, job_id: str, at: str) -> None: ...

    def set_expiry(
        self, tenant_id: str, job_id: str, expires_at: int, *, status: JobStatus
    ) -> None: ...

    def clear_expiry(self, tenant_id: str, job_id: str) -> None: ...


@dataclass(frozen=True)
class Deletion:
    status: str  # deleted | deleting
    artifacts: int = 0
    items: int = 0


def _ends(job: JobRecord) -> bool:
    """No worker will write for it again: final, dead-lettered (kept only for redrive) or in
    review (kept for a person's resolution)."""
    return job.status.is_settled


def delete_job(
    svc: JobServices,
    data: JobData,
    tenant_id: str,
    job_id: str,
    *,
    wait_s: float = STOP_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Deletion:
    """Delete a job and everything it left; safe to repeat (a gone job is deleted again)."""
    try:
        job = svc.store.get(tenant_id, job_id)
    except NotFound:
        # Gone already (or never there: the same answer, so nothing leaks across tenants).
        return Deletion("deleted", artifacts=data.delete_artifacts(tenant_id, job_id))
    if not _ends(job):
        stopped = _stop(svc, data, job, wait_s=wait_s, sleep=sleep)
        if stopped is None:
            # Erased meanwhile by the retention consumer, which saw it end: deleted.
            return Deletion("deleted", artifacts=data.delete_artifacts(tenant_id, job_id))
        if not _ends(stopped):
            return Deletion("deleting")
        job = stopped
    return erase(data, job)


def erase(data: JobData, job: JobRecord) -> Deletion:
    # Artifacts first: while the record exists a failed deletion can be asked for again.
    artifacts = data.delete_artifacts(job.tenant_id, job.job_id)
    items = data.delete_items(job.tenant_id, job.job_id, job.idempotency_key)
    return Deletion("deleted", artifacts=artifacts, items=items)


def _stop(
    svc: JobServices,
    data: JobData,
    job: JobRecord,
    *,
    wait_s: float,
    sleep: Callable[[float], None],
) -> JobRecord | None:
    """The job once stopped (or as it is after ``wait_s``); None when it is gone: a deletion
    asked for before it ended is carried out by the retention consumer as soon as it ends."""
    tenant_id, job_id = job.tenant_id, job.job_id
    data.request_delete(tenant_id, job_id, svc.lifecycle.at())
    try:
        try:
            current = svc.lifecycle.cancel(tenant_id, job_id)
        except JobNotCancellable:
            return svc.store.get(tenant_id, job_id)
        waited = 0.0
        while not _ends(current) and waited < wait_s:
            sleep(STOP_POLL_S)
            waited += STOP_POLL_S
            current = svc.store.get(tenant_id, job_id)
    except NotFound:
        return None
    return current


class RetentionConsumer:
    """A jobs-stream consumer: expiry on ended jobs, and deletions that waited for a stop."""

    name = "retention"

    def __init__(self, data: JobData, limits: Callable[[str], TenantLimits]) -> None:
        self._data = data
        self._limits = limits

    def handle(self, changes: Sequence[JobChange]) -> None:
        for change in changes:
            job = change.new
            if job is None or change.became is None:
                continue  # deleted, or a write that did not move the job
            if _ends(job):
                if job.delete_requested_at is not None:
                    erase(self._data, job)
                    continue
                if change.expiry_set is not None:
                    continue  # written with the outcome (the worker knew the retention)
                ended = job.finished_at or job.updated_at
                retention = self._limits(job.tenant_id).retention_s
                expires = int(datetime.fromisoformat(ended.replace("Z", "+00:00")).timestamp())
                self._data.set_expiry(
                    job.tenant_id, job.job_id, expires + retention, status=job.status
                )
            elif change.old is not None and change.old.status in AWAITING_A_PERSON:
                # Redriven, or resolved to run again: alive again.
                self._data.clear_expiry(job.tenant_id, job.job_id)
