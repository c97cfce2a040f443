"""Where a new job sits in the jobs table's indexes, its dependency edges, and the queries
the dispatch moves and the sweeper need (dependants, dispatched, recheck_waiting, ops_due,
next_due).

- queued (or scheduled within 15 minutes): marked ``unqueued`` until its message is known
  sent, and in the ops ``deadline`` set if it has a latest start;
- scheduled further ahead: in the ops ``due`` set at the time its message must go out;
- waiting: in the ops ``waiting`` set (the sweeper's backstop), with one edge item
  ``DEP#<parent>#<child>`` per parent, written in the same transaction as the job. Each
  parent is marked ``has_dependants`` first, so the jobs stream's reader queries for edges
  only when a finished job's record says it may have some (most jobs have none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    OPS_SHARDS,
    UNQUEUED,
    condition_failed,
    deserialize,
    epoch_of,
    item_to_record,
    job_sk,
    ops_key,
    ops_time,
    serialize,
    status_pk,
    tenant_pk,
    update_job_if,
)
from pagefleet.errors import NotFound
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import WAITING_FIRST_LOOK_S
from pagefleet.jobs.states import JobStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def placement(record: JobRecord, dispatch_at: int | None) -> dict[str, Any]:
    """The index attributes of a new job, by its first state."""
    if record.status is JobStatus.WAITING:
        first_look = epoch_of(record.created_at) + WAITING_FIRST_LOOK_S
        return {"ops_pk": ops_key("waiting", record.job_id), "ops_sk": ops_time(first_look)}
    if dispatch_at is not None:
        return {"ops_pk": ops_key("due", record.job_id), "ops_sk": ops_time(dispatch_at)}
    attrs: dict[str, Any] = {"unqueued_pk": UNQUEUED}
    if record.deadline_at is not None:
        attrs.update(ops_pk=ops_key("deadline", record.job_id), ops_sk=ops_time(record.deadline_at))
    return attrs


def edge_sk(parent_id: str, child_id: str) -> str:
    return f"DEP#{parent_id}#{child_id}"


def edge_puts(table: str, record: JobRecord) -> list[dict[str, Any]]:
    """Transaction items for a waiting job's edges (one per parent)."""
    return [
        {
            "Put": {
                "TableName": table,
                "Item": serialize(
                    {
                        "pk": tenant_pk(record.tenant_id),
                        "sk": edge_sk(parent, record.job_id),
                        "job_id": record.job_id,
                    }
                ),
            }
        }
        for parent in record.request.depends_on
    ]


HAS_DEPENDANTS = "has_dependants"


class DispatchQueries:
    _db: DynamoDBClient
    _table: str

    def mark_parents(self, record: JobRecord) -> None:
        """Mark each parent as having dependants, before the edges exist: an edge is never
        without its parent's mark, so a parent's final change without the mark has none
        (a parent that ended before the mark is settled by the child's own first look)."""
        for parent in record.request.depends_on:
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=serialize({"pk": tenant_pk(record.tenant_id), "sk": job_sk(parent)}),
                    UpdateExpression="SET #d = :t",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeNames={"#d": HAS_DEPENDANTS},
                    ExpressionAttributeValues=serialize({":t": True}),
                )
            except ClientError as exc:
                if condition_failed(exc):
                    raise NotFound(f"job {parent} not found", job_id=parent) from exc
                raise

    def dependants(self, tenant_id: str, job_id: str) -> list[str]:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :edge)",
            "ExpressionAttributeValues": serialize(
                {":pk": tenant_pk(tenant_id), ":edge": f"DEP#{job_id}#"}
            ),
            "ProjectionExpression": "job_id",
        }
        out: list[str] = []
        while True:
            resp = self._db.query(**kwargs)
            out += [str(deserialize(i)["job_id"]) for i in resp.get("Items", [])]
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def count(self, tenant_id: str, status: JobStatus) -> int:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": "by_status",
            "KeyConditionExpression": "status_pk = :sp",
            "ExpressionAttributeValues": serialize({":sp": status_pk(tenant_id, status)}),
            "Select": "COUNT",
        }
        total = 0
        while True:
            resp = self._db.query(**kwargs)
            total += int(resp.get("Count", 0))
            if "LastEvaluatedKey" not in resp:
                return total
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def oldest(self, tenant_id: str, status: JobStatus) -> JobRecord | None:
        resp = self._db.query(
            TableName=self._table,
            IndexName="by_status",
            KeyConditionExpression="status_pk = :sp",
            ExpressionAttributeValues=serialize({":sp": status_pk(tenant_id, status)}),
            ScanIndexForward=True,  # job ids are ULIDs: ascending is oldest first
            Limit=1,
        )
        items = resp.get("Items", [])
        return item_to_record(items[0]) if items else None

    def dispatched(self, tenant_id: str, job_id: str, *, at: str) -> None:
        job = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
            ProjectionExpression="deadline_at",
            ConsistentRead=True,
        ).get("Item")
        deadline = deserialize(job).get("deadline_at") if job else None
        values: dict[str, Any] = {":at": at, ":s": JobStatus.SCHEDULED.value}
        if deadline is not None:
            update = "SET enqueued_at = :at, ops_pk = :ops, ops_sk = :ops_sk"
            values.update({":ops": ops_key("deadline", job_id), ":ops_sk": ops_time(int(deadline))})
        else:
            update = "SET enqueued_at = :at REMOVE ops_pk, ops_sk"
        update_job_if(self._db, self._table, tenant_id, job_id, update, "#status = :s", values)

    def recheck_waiting(self, tenant_id: str, job_id: str, *, due: int) -> None:
        values = {":sk": ops_time(due), ":s": JobStatus.WAITING.value}
        update_job_if(
            self._db, self._table, tenant_id, job_id, "SET ops_sk = :sk", "#status = :s", values
        )

    def ops_due(self, kind: str, before_epoch: int, limit: int = 100) -> list[tuple[str, str]]:
        """(tenant_id, job_id) of jobs in the ops index of ``kind`` due before a time."""
        out: list[tuple[str, str]] = []
        shards = ["dead"] if kind == "dead" else [f"{kind}#{n}" for n in range(OPS_SHARDS)]
        for shard in shards:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": "ops",
                "KeyConditionExpression": "ops_pk = :p AND ops_sk < :t",
                "ExpressionAttributeValues": serialize({":p": shard, ":t": ops_time(before_epoch)}),
                "Limit": limit,
            }
            resp = self._db.query(**kwargs)
            for item in resp.get("Items", []):
                data = deserialize(item)
                out.append((str(data["tenant_id"]), str(data["job_id"])))
        return out

    def next_due(self, kind: str, after_epoch: int) -> int | None:
        """The earliest time (epoch s) in the ops index of ``kind`` at or after a time: when
        the next running job's lease ends, for the workers' lease watch."""
        found: list[int] = []
        shards = ["dead"] if kind == "dead" else [f"{kind}#{n}" for n in range(OPS_SHARDS)]
        for shard in shards:
            resp = self._db.query(
                TableName=self._table,
                IndexName="ops",
                KeyConditionExpression="ops_pk = :p AND ops_sk >= :t",
                ExpressionAttributeValues=serialize({":p": shard, ":t": ops_time(after_epoch)}),
                ProjectionExpression="ops_sk",
                Limit=1,
            )
            found += [int(deserialize(i)["ops_sk"]) for i in resp.get("Items", [])]
        return min(found, default=None)
