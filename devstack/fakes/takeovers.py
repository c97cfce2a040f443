"""The in-memory job store's takeover lock, as the DynamoDB store keeps it
(pagefleet/adapters/dynamodb/takeovers.py): the ``takeover`` of the job's record, each move
under the same conditions."""

from __future__ import annotations

from typing import Any

from pagefleet.adapters.dynamodb.takeovers import TAKEABLE
from pagefleet.errors import NotFound
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.takeover import Takeover, not_held, not_running, taken_over


class FakeTakeovers:
    """Mixed into FakeJobStore (it has ``_lock`` and ``_rows``)."""

    _lock: Any
    _rows: dict[tuple[str, str], Any]

    def _takeover_row(self, tenant_id: str, job_id: str) -> Any:
        row = self._rows.get((tenant_id, job_id))
        if row is None:
            raise NotFound(f"job {job_id} not found", job_id=job_id)
        return row

    def take_over(self, tenant_id: str, job_id: str, takeover: Takeover, *, now: int) -> JobRecord:
        with self._lock:
            row = self._takeover_row(tenant_id, job_id)
            job = row.job
            if job.status not in TAKEABLE:
                raise not_running(job_id, job.status.value)
            held = job.takeover
            if held is not None and held.holder == takeover.holder and held.until >= now:
                update = {"takeover": held.model_copy(update={"until": takeover.until})}
            elif held is not None and held.until >= now:
                raise taken_over(job_id, held)
            else:
                update = {"takeover": takeover}
            row.job = job.model_copy(update=update)
            return row.job

    def touch_takeover(
        self,
        tenant_id: str,
        job_id: str,
        takeover_id: str,
        *,
        holder: str,
        until: int,
        now: int,
        count_input: bool = False,
    ) -> Takeover:
        with self._lock:
            row = self._takeover_row(tenant_id, job_id)
            held = row.job.takeover
            if (
                row.job.status not in TAKEABLE
                or held is None
                or held.takeover_id != takeover_id
                or held.holder != holder
                or held.until < now
            ):
                raise not_held(job_id, takeover_id)
            touched = held.model_copy(update={"until": until, "seq": held.seq + count_input})
            row.job = row.job.model_copy(update={"takeover": touched})
            return touched

    def release_takeover(
        self, tenant_id: str, job_id: str, takeover_id: str, *, expired_before: int | None = None
    ) -> Takeover | None:
        with self._lock:
            row = self._takeover_row(tenant_id, job_id)
            held = row.job.takeover
            if held is None or held.takeover_id != takeover_id:
                return None
            if expired_before is not None and held.until >= expired_before:
                return None
            row.job = row.job.model_copy(update={"takeover": None})
            return held
