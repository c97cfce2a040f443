"""The in-memory job store's writes for irreversible steps, with the DynamoDB store's
conditions (pagefleet/adapters/dynamodb/review.py): an attempt's checkpoints (fenced), and a
person's resolution of a job in review (conditioned on the review)."""

from __future__ import annotations

from typing import Any

from pagefleet.errors import IllegalTransition, LeaseLost
from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import LeaseRenewal
from pagefleet.jobs.states import JobStatus


class FakeReview:
    """Mixed into FakeJobStore (it has ``_lock``, ``_row`` and ``_fenced``)."""

    _lock: Any
    _row: Any
    _fenced: Any

    def record_progress(
        self,
        tenant_id: str,
        job_id: str,
        *,
        attempt: int,
        owner: str,
        checkpoints: list[Checkpoint],
        result: dict[str, Any] | None = None,
        compensation: Compensation | None = None,
        renewal: LeaseRenewal | None = None,
    ) -> JobRecord:
        with self._lock:
            row = self._fenced(tenant_id, job_id, attempt, owner, "no longer holds the lease")
            update: dict[str, Any] = {}
            if renewal is not None:
                ends = row.job.lease_expires_at
                if ends is None or ends <= renewal.now:
                    raise LeaseLost(
                        f"job {job_id} attempt {attempt}: its lease has ended",
                        attempt=row.job.attempt,
                        status=row.job.status.value,
                    )
                update["lease_expires_at"] = renewal.until
                if row.ops is not None:
                    row.ops = (row.ops[0], renewal.until)
            irreversible(update, checkpoints=checkpoints, compensation=compensation)
            if result is not None:
                update["result"] = result
            row.job = row.job.model_copy(update=update, deep=True)
            return row.job.model_copy(deep=True)

    def resolve_review(
        self,
        tenant_id: str,
        job_id: str,
        *,
        to: JobStatus,
        at: str,
        checkpoints: list[Checkpoint],
        resolution: Resolution,
    ) -> JobRecord:
        with self._lock:
            row = self._row(tenant_id, job_id)
            job = row.job
            if job.status is not JobStatus.NEEDS_REVIEW:
                raise IllegalTransition(
                    f"job {job_id} is {job.status.value}, not needs_review",
                    status=job.status.value,
                )
            update: dict[str, Any] = {"status": to, "updated_at": at, "error": None}
            update.update(checkpoints=list(checkpoints), resolution=resolution, retry_at=None)
            if to.is_final:
                update["finished_at"] = at
                row.ops, row.unqueued = None, False
            else:  # queued again, as a redrive
                update.update(attempt_base=job.attempt, enqueued_at=None, leases_lost=0)
                row.ops, row.unqueued = None, True
            row.job = job.model_copy(update=update, deep=True)
            return row.job.model_copy(deep=True)


def irreversible(
    update: dict[str, Any],
    *,
    checkpoints: list[Checkpoint] | None = None,
    compensation: Compensation | None = None,
) -> None:
    """As the DynamoDB store's ``set_irreversible``: what is given replaces what was."""
    if checkpoints is not None:
        update["checkpoints"] = list(checkpoints)
    if compensation is not None:
        update["compensation"] = compensation
