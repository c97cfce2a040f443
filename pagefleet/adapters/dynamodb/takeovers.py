"""The job store's takeover lock (pagefleet.jobs.takeover): a ``takeover`` map on the job's
record, every move of it a conditional write. The worker reads it with the cancel flag and
the watchers, in the read it makes every second (``run_signals``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    item_to_record,
    job_sk,
    serialize,
    tenant_pk,
)
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.takeover import Takeover, not_held, not_running, taken_over

# A page exists to take over while a worker holds the job: running, or parked for a person.
TAKEABLE = (JobStatus.RUNNING, JobStatus.WAITING_FOR_HUMAN)
# "until" is one of DynamoDB's reserved words; the others are named alike for clarity.
_NAMES = {
    "#status": "status",
    "#t": "takeover",
    "#id": "takeover_id",
    "#u": "until",
    "#n": "seq",
    "#h": "holder",
}
_STATUS_OK = "#status IN (:running, :waiting)"
_STATUSES = {":running": TAKEABLE[0].value, ":waiting": TAKEABLE[1].value}


def takeover_of(item: dict[str, Any]) -> Takeover | None:
    found = deserialize(item).get("takeover")
    return Takeover.model_validate(found) if isinstance(found, dict) else None


class TakeoverWrites:
    """Mixed into the DynamoDB job store (it has ``_db``, ``_table`` and ``get``)."""

    _db: Any
    _table: str
    get: Callable[..., JobRecord]

    def _takeover_key(self, tenant_id: str, job_id: str) -> dict[str, Any]:
        return serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)})

    def _takeover_write(
        self, tenant_id: str, job_id: str, update: str, condition: str, values: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The item after (REMOVE: before) the write; None when the condition failed."""
        expression = update + " " + condition
        try:
            out = self._db.update_item(
                TableName=self._table,
                Key=self._takeover_key(tenant_id, job_id),
                UpdateExpression=update,
                ConditionExpression=f"attribute_exists(pk) AND {condition}",
                ExpressionAttributeNames={k: v for k, v in _NAMES.items() if k in expression},
                ExpressionAttributeValues=serialize(values),
                ReturnValues="ALL_OLD" if update.startswith("REMOVE") else "ALL_NEW",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return None
        return dict(out.get("Attributes") or {})

    def take_over(self, tenant_id: str, job_id: str, takeover: Takeover, *, now: int) -> JobRecord:
        free = "(attribute_not_exists(#t) OR #t.#u < :now)"
        values = {":t": takeover.model_dump(), ":now": now, **_STATUSES}
        item = self._takeover_write(
            tenant_id, job_id, "SET #t = :t", f"{_STATUS_OK} AND {free}", values
        )
        if item is not None:
            return item_to_record(item)
        job = self.get(tenant_id, job_id)  # NotFound for another tenant's
        if job.status not in TAKEABLE:
            raise not_running(job_id, job.status.value)
        held = job.takeover
        if held is not None and held.holder == takeover.holder:
            # Its holder again (another tab, a retry): the same takeover, renewed.
            self.touch_takeover(
                tenant_id,
                job_id,
                held.takeover_id,
                holder=held.holder,
                until=takeover.until,
                now=now,
            )
            return self.get(tenant_id, job_id)
        if held is not None and held.until >= now:
            raise taken_over(job_id, held)
        return self.take_over(tenant_id, job_id, takeover, now=now)  # it moved: once more

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
        update = "SET #t.#u = :u" + (", #t.#n = #t.#n + :one" if count_input else "")
        condition = f"{_STATUS_OK} AND #t.#id = :id AND #t.#h = :h AND #t.#u >= :now"
        values = {":u": until, ":id": takeover_id, ":h": holder, ":now": now, **_STATUSES}
        if count_input:
            values[":one"] = 1
        item = self._takeover_write(tenant_id, job_id, update, condition, values)
        found = takeover_of(item) if item is not None else None
        if found is None:
            self.get(tenant_id, job_id)  # NotFound for another tenant's
            raise not_held(job_id, takeover_id)
        return found

    def release_takeover(
        self, tenant_id: str, job_id: str, takeover_id: str, *, expired_before: int | None = None
    ) -> Takeover | None:
        condition = "#t.#id = :id"
        values: dict[str, Any] = {":id": takeover_id}
        if expired_before is not None:
            condition += " AND #t.#u < :before"
            values[":before"] = expired_before
        item = self._takeover_write(tenant_id, job_id, "REMOVE #t", condition, values)
        if item is None:
            self.get(tenant_id, job_id)  # NotFound for another tenant's
            return None
        return takeover_of(item)
