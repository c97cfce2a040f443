"""The in-memory job store's moves of a job that waits for a person, with the DynamoDB
store's conditions (pagefleet/adapters/dynamodb/human_waits.py)."""

from __future__ import annotations

from typing import Any

from pagefleet.errors import IllegalTransition
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

_WAITING = frozenset({JobStatus.WAITING_FOR_HUMAN})


class FakeHumanWaits:
    """Mixed into FakeJobStore (it has ``_lock``, ``_row`` and ``_fenced``)."""

    _lock: Any
    _row: Any
    _fenced: Any

    def park(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, wait: HumanWait, at: str
    ) -> JobRecord:
        with self._lock:
            row = self._fenced(tenant_id, job_id, attempt, owner, "no longer holds the job")
            update = {"status": JobStatus.WAITING_FOR_HUMAN, "human": wait, "updated_at": at}
            row.job = row.job.model_copy(update=update)
            return row.job.model_copy(deep=True)

    def resume(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, at: str
    ) -> JobRecord:
        with self._lock:
            row = self._fenced(
                tenant_id, job_id, attempt, owner, "no longer holds the job", _WAITING
            )
            row.job = row.job.model_copy(update={"status": JobStatus.RUNNING, "updated_at": at})
            return row.job.model_copy(deep=True)

    def answer_wait(
        self, tenant_id: str, job_id: str, *, asked: HumanWait, answered: HumanWait, at: str
    ) -> JobRecord:
        with self._lock:
            row = self._row(tenant_id, job_id)
            job = row.job
            if job.status is not JobStatus.WAITING_FOR_HUMAN or job.human != asked:
                raise IllegalTransition(
                    f"job {job_id} is {job.status.value}; only a job waiting_for_human can "
                    "be continued",
                    status=job.status.value,
                )
            row.job = job.model_copy(update={"human": answered, "updated_at": at})
            return row.job.model_copy(deep=True)
