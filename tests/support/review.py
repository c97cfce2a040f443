"""A job stopped in needs_review as a worker leaves it: claimed, then ended after its
irreversible step with the step's checkpoint ``unknown`` (nobody can tell whether it took
effect). For tests of what follows: resolution, notifications, listings."""

from __future__ import annotations

from typing import Any

from pagefleet.jobs.checkpoints import Checkpoint
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.ports import JobStore
from pagefleet.jobs.record import AttemptRecord, JobError, JobRecord
from pagefleet.jobs.states import JobStatus


def stop_in_review(
    store: JobStore,
    tenant_id: str,
    job_id: str,
    *,
    step: int,
    label: str,
    result: dict[str, Any] | None = None,
    owner: str = "gone/1",
) -> JobRecord:
    """The queued job ``job_id``, claimed by ``owner`` and stopped in review at ``step``."""
    claimed = store.claim(
        tenant_id, job_id, owner=owner, lease_until=2**31, now=0, started_at=iso(utcnow())
    )
    unknown = Checkpoint(
        step=step, label=label, state="unknown", attempt=claimed.attempt, at=iso(utcnow())
    )
    return store.finish(
        tenant_id,
        job_id,
        attempt=claimed.attempt,
        owner=owner,
        status=JobStatus.NEEDS_REVIEW,
        at=iso(utcnow()),
        result=result or {},
        artifacts=[],
        error=JobError(kind="needs_review", message=f"whether step {step} took effect is unknown"),
        history=AttemptRecord(attempt=claimed.attempt, worker=owner, started_at=iso(utcnow())),
        checkpoints=[unknown],
    )
