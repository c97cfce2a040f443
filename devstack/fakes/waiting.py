"""The in-memory job store's notes on jobs that wait, with the DynamoDB store's
conditions (pagefleet/adapters/dynamodb/job_store.py): a deferral's reason and the successor
message that carries the job on, a lost retry's next look, a scheduled job's dispatch and a
waiting job's next recheck."""

from __future__ import annotations

from typing import Any

from pagefleet.adapters.dynamodb.codec import ops_key
from pagefleet.jobs.states import JobStatus


class FakeWaiting:
    """Mixed into FakeJobStore (it has ``_lock`` and ``_rows``)."""

    _lock: Any
    _rows: Any

    def defer(
        self,
        tenant_id: str,
        job_id: str,
        *,
        reason: str,
        at: str,
        successor: str | None = None,
        due: int | None = None,
    ) -> None:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            if row is not None and row.job.status in (
                JobStatus.QUEUED,
                JobStatus.RETRY_SCHEDULED,
            ):
                update: dict[str, Any] = {"deferred_reason": reason, "updated_at": at}
                if successor is not None and due is not None:
                    update |= {"deferred_to": successor, "deferred_due": due}
                row.job = row.job.model_copy(update=update)

    def postpone_retry(self, tenant_id: str, job_id: str, *, due: int) -> None:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            if row is not None and row.job.status is JobStatus.RETRY_SCHEDULED:
                row.ops = (ops_key("retry", job_id), due)  # the sweeper's look; still due

    def dispatched(self, tenant_id: str, job_id: str, *, at: str) -> None:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            if row is None or row.job.status is not JobStatus.SCHEDULED:
                return
            row.job = row.job.model_copy(update={"enqueued_at": at})
            deadline = row.job.deadline_at
            row.ops = (ops_key("deadline", job_id), deadline) if deadline is not None else None

    def recheck_waiting(self, tenant_id: str, job_id: str, *, due: int) -> None:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            if row is not None and row.job.status is JobStatus.WAITING and row.ops:
                row.ops = (row.ops[0], due)
