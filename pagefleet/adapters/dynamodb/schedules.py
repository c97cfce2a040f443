"""Schedule records and their runs in the jobs table, under their tenant's partition.

``SCHED#<id>`` is the schedule; ``SCHEDRUN#<id>#<scheduled time>`` one run, written once per
scheduled time (a retried fire finds it there). A schedule whose mirror in EventBridge
Scheduler is not known to be up to date sits in the sparse ``ops`` index (``schedsync``),
where the sweeper finds it.

The definition is one attribute (``doc``); what runs write (``last_run``, ``health`` with
``health_job``, the newest run it counted) and the pinned ``baseline`` are attributes of
their own, each written by its own update, so a change to the definition never undoes a
run's write nor the other way round.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    put_new,
    serialize,
    tenant_pk,
)
from pagefleet.adapters.dynamodb.transactions import write_together
from pagefleet.errors import NotFound
from pagefleet.schedules.health import ScheduleHealth
from pagefleet.schedules.service import Schedule, ScheduleRun

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

UNSYNCED = "schedsync"
# What lives beside the definition, not in ``doc``.
_OWN_ATTRIBUTES = {"synced", "last_run", "health", "baseline_job_id"}


def schedule_sk(schedule_id: str) -> str:
    return f"SCHED#{schedule_id}"


def run_sk(schedule_id: str, scheduled_time: str) -> str:
    return f"SCHEDRUN#{schedule_id}#{scheduled_time}"


class DynamoScheduleStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def create(self, schedule: Schedule) -> None:
        item: dict[str, Any] = {
            "pk": tenant_pk(schedule.tenant_id),
            "sk": schedule_sk(schedule.schedule_id),
            "tenant_id": schedule.tenant_id,
            "schedule_id": schedule.schedule_id,
            "doc": schedule.model_dump_json(exclude=_OWN_ATTRIBUTES),
            "updated_at": schedule.updated_at,
        }
        if not schedule.synced:
            item.update(ops_pk=UNSYNCED, ops_sk=schedule.updated_at)
        put_new(self._db, self._table, item)

    def replace(self, schedule: Schedule) -> None:
        """The definition only: runs' writes (last run, health) and the baseline stay."""
        values: dict[str, Any] = {
            ":doc": schedule.model_dump_json(exclude=_OWN_ATTRIBUTES),
            ":u": schedule.updated_at,
        }
        expression = "SET doc = :doc, updated_at = :u"
        if schedule.synced:
            expression += " REMOVE ops_pk, ops_sk"
        else:
            expression += ", ops_pk = :ops, ops_sk = :u"
            values[":ops"] = UNSYNCED
        self._update(schedule.tenant_id, schedule.schedule_id, expression, values)

    def set_baseline(self, tenant_id: str, schedule_id: str, job_id: str | None) -> None:
        if job_id is None:
            self._update(tenant_id, schedule_id, "REMOVE baseline_job_id", {})
        else:
            self._update(tenant_id, schedule_id, "SET baseline_job_id = :j", {":j": job_id})

    def record_health(
        self, tenant_id: str, schedule_id: str, health: ScheduleHealth, *, counted: str | None
    ) -> bool:
        values: dict[str, Any] = {":h": health.model_dump_json(), ":job": health.last_job_id}
        if counted is None:
            condition = "attribute_not_exists(health_job)"
        else:
            condition = "health_job = :counted"
            values[":counted"] = counted
        try:
            self._update(
                tenant_id,
                schedule_id,
                "SET health = :h, health_job = :job",
                values,
                condition=condition,
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def _update(
        self,
        tenant_id: str,
        schedule_id: str,
        expression: str,
        values: dict[str, Any],
        *,
        condition: str | None = None,
    ) -> None:
        """An update of an existing schedule (NotFound if there is none, unless
        ``condition`` says more, when its refusal is the caller's to read)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Key": serialize({"pk": tenant_pk(tenant_id), "sk": schedule_sk(schedule_id)}),
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(pk)"
            + (f" AND ({condition})" if condition else ""),
        }
        if values:
            kwargs["ExpressionAttributeValues"] = serialize(values)
        try:
            self._db.update_item(**kwargs)
        except ClientError as exc:
            if condition_failed(exc) and (
                condition is None or not self._exists(tenant_id, schedule_id)
            ):
                raise _missing(schedule_id) from exc
            raise

    def _exists(self, tenant_id: str, schedule_id: str) -> bool:
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": schedule_sk(schedule_id)}),
            ProjectionExpression="pk",
            ConsistentRead=True,
        )
        return "Item" in resp

    def get(self, tenant_id: str, schedule_id: str) -> Schedule:
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": schedule_sk(schedule_id.lower())}),
            ConsistentRead=True,
        )
        if "Item" not in resp:
            raise _missing(schedule_id)
        return _schedule(deserialize(resp["Item"]))

    def list_for(self, tenant_id: str) -> list[Schedule]:
        items = self._query(tenant_id, "SCHED#", newest_first=False, limit=None)
        return [_schedule(i) for i in items]

    def delete(self, tenant_id: str, schedule_id: str) -> None:
        self._db.delete_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": schedule_sk(schedule_id.lower())}),
        )

    def mark_synced(self, tenant_id: str, schedule_id: str, updated_at: str) -> None:
        """Only the version that was mirrored: a change made meanwhile stays unsynced."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": schedule_sk(schedule_id)}),
                UpdateExpression="REMOVE ops_pk, ops_sk",
                ConditionExpression="updated_at = :u",
                ExpressionAttributeValues=serialize({":u": updated_at}),
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def unsynced(self, limit: int = 100) -> list[tuple[str, str]]:
        resp = self._db.query(
            TableName=self._table,
            IndexName="ops",
            KeyConditionExpression="ops_pk = :p",
            ExpressionAttributeValues=serialize({":p": UNSYNCED}),
            Limit=limit,
        )
        items = [deserialize(i) for i in resp.get("Items", [])]
        return [(str(i["tenant_id"]), str(i["schedule_id"])) for i in items]

    def record_run(self, tenant_id: str, schedule_id: str, run: ScheduleRun) -> bool:
        pk = tenant_pk(tenant_id)
        item = {
            "pk": pk,
            "sk": run_sk(schedule_id, run.scheduled_time),
            "doc": run.model_dump_json(),
        }
        items: Any = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": serialize(item),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": serialize({"pk": pk, "sk": schedule_sk(schedule_id)}),
                    "UpdateExpression": "SET last_run = :r",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": serialize({":r": run.model_dump_json()}),
                }
            },
        ]
        try:
            write_together(self._db, items)
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def runs(self, tenant_id: str, schedule_id: str, limit: int) -> list[ScheduleRun]:
        items = self._query(tenant_id, f"SCHEDRUN#{schedule_id}#", newest_first=True, limit=limit)
        return [ScheduleRun.model_validate_json(i["doc"]) for i in items]

    def _query(
        self, tenant_id: str, prefix: str, *, newest_first: bool, limit: int | None
    ) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": serialize(
                {":pk": tenant_pk(tenant_id), ":prefix": prefix}
            ),
            "ScanIndexForward": not newest_first,
        }
        out: list[dict[str, Any]] = []
        while True:
            if limit is not None:
                kwargs["Limit"] = limit - len(out)
            resp = self._db.query(**kwargs)
            out += [deserialize(i) for i in resp.get("Items", [])]
            if "LastEvaluatedKey" not in resp or (limit is not None and len(out) >= limit):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def _schedule(data: dict[str, Any]) -> Schedule:
    doc = json.loads(data["doc"])
    if data.get("last_run"):
        doc["last_run"] = json.loads(data["last_run"])
    if data.get("health"):
        doc["health"] = json.loads(data["health"])
    doc["baseline_job_id"] = data.get("baseline_job_id")
    doc["synced"] = "ops_pk" not in data
    return Schedule.model_validate(doc)


def _missing(schedule_id: str) -> NotFound:
    return NotFound(f"schedule {schedule_id} not found", field="schedule_id")
