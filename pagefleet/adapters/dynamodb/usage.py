"""Usage in its own table, tenant first (``pagefleet.specs.resources.USAGE_TABLE``).

Per attempt one marker ``ATTEMPT#<job>#<attempt>`` holds what the attempt used; in the same
transaction the counts are added to the tenant's day (``DAY#<day>#S<n>#*``) and to its
workflow's day (``DAY#<day>#S<n>#WF#<name>``). The marker's condition (it must not exist)
makes a retried write count nothing: the whole transaction is refused. Day totals carry the
sparse ``by_day`` index key, so an operator lists every tenant's day in one query. Every
item expires after ``USAGE_RETENTION_DAYS``.

A day's totals are kept in ``DAY_SHARDS`` items, the job's hash choosing one, and summed when
read: every attempt's transaction writes its tenant's day, and two transactions writing one
item at once meet (one is cancelled and sent again: ``transactions.write_together``), so a
tenant ending many attempts a second would otherwise queue them on one item. Days written
before the shards (``DAY#<day>#*``, ``DAY#<day>#WF#<name>``) are read and summed alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    serialize,
    shard_of,
    tenant_pk,
)
from pagefleet.adapters.dynamodb.transactions import write_together
from pagefleet.tenancy.usage import ALL_WORKFLOWS, AttemptUsage, UsageRow, counts_of

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

USAGE_RETENTION_DAYS = 400
_DAY_S = 86_400
# Counts are kept as integers: browser time in milliseconds (DynamoDB numbers are exact).
_MS_FIELDS = {"browser_seconds": "browser_ms"}


def attempt_sk(job_id: str, attempt: int) -> str:
    return f"ATTEMPT#{job_id}#{attempt:04d}"


# How many items hold one tenant's day (and each workflow's): attempts ending together
# rarely write the same one.
DAY_SHARDS = 8


def day_shard(job_id: str) -> int:
    return shard_of(job_id, DAY_SHARDS)


def day_sk(day: str, workflow: str = ALL_WORKFLOWS, *, shard: int | None = None) -> str:
    """A day's totals item (``shard`` None: as written before the shards)."""
    part = "" if shard is None else f"S{shard}#"
    return f"DAY#{day}#{part}*" if workflow == ALL_WORKFLOWS else f"DAY#{day}#{part}WF#{workflow}"


def _stored(counts: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in counts.items():
        if name in _MS_FIELDS:
            out[_MS_FIELDS[name]] = round(float(value) * 1000)
        else:
            out[name] = int(value)
    return out


def _row(data: dict[str, Any]) -> UsageRow:
    sk = str(data["sk"])
    _, day, rest = sk.split("#", 2)
    shard, sep, after = rest.partition("#")
    if sep and shard[:1] == "S" and shard[1:].isdigit():
        rest = after  # a shard's item (a workflow part starts "WF#" or is "*")
    workflow = ALL_WORKFLOWS if rest == "*" else rest.removeprefix("WF#")
    return UsageRow(
        tenant_id=str(data["tenant_id"]),
        day=day,
        workflow=workflow,
        jobs=int(data.get("jobs", 0)),
        attempts=int(data.get("attempts", 0)),
        browser_seconds=int(data.get("browser_ms", 0)) / 1000,
        page_requests=int(data.get("page_requests", 0)),
        artifact_bytes=int(data.get("artifact_bytes", 0)),
        artifact_puts=int(data.get("artifact_puts", 0)),
    )


class DynamoUsageStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def record(self, usage: AttemptUsage) -> bool:
        pk = tenant_pk(usage.tenant_id)
        shard = day_shard(usage.job_id)
        expires = _expiry(usage.day)
        marker = {
            "pk": pk,
            "sk": attempt_sk(usage.job_id, usage.attempt),
            **usage.model_dump(exclude={"browser_seconds"}),
            "browser_ms": round(usage.browser_seconds * 1000),
            "expires_at": expires,
        }
        counts = _stored(counts_of(usage))
        adds = ", ".join(f"#{n} :{n}" for n in counts)
        names = {f"#{n}": n for n in counts}
        values = {f":{n}": v for n, v in counts.items()}

        def add(sk: str, extra: dict[str, Any]) -> dict[str, Any]:
            sets = ", ".join(f"{k} = :{k}" for k in extra)
            return {
                "Update": {
                    "TableName": self._table,
                    "Key": serialize({"pk": pk, "sk": sk}),
                    "UpdateExpression": f"ADD {adds} SET {sets}",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": serialize(
                        {**values, **{f":{k}": v for k, v in extra.items()}}
                    ),
                }
            }

        base = {"tenant_id": usage.tenant_id, "expires_at": expires}
        items: list[Any] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": serialize(marker),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            add(
                day_sk(usage.day, shard=shard),
                {**base, "day_pk": f"DAY#{usage.day}", "day_sk": f"{usage.tenant_id}#S{shard}"},
            ),
            add(day_sk(usage.day, usage.workflow, shard=shard), base),
        ]
        try:
            write_together(self._db, items)
        except ClientError as exc:
            if condition_failed(exc, item=0):
                return False
            raise
        return True

    def days(self, tenant_id: str, first: str, last: str) -> list[UsageRow]:
        return _summed(
            _row(item)
            for item in self._query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :a AND :b",
                ExpressionAttributeValues=serialize(
                    {":pk": tenant_pk(tenant_id), ":a": f"DAY#{first}", ":b": f"DAY#{last}#~"}
                ),
            )
        )

    def every_tenant(self, day: str) -> list[UsageRow]:
        return _summed(
            _row(item)
            for item in self._query(
                IndexName="by_day",
                KeyConditionExpression="day_pk = :d",
                ExpressionAttributeValues=serialize({":d": f"DAY#{day}"}),
            )
        )

    def attempts(self, tenant_id: str, job_id: str) -> list[AttemptUsage]:
        out = []
        for item in self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=serialize(
                {":pk": tenant_pk(tenant_id), ":prefix": f"ATTEMPT#{job_id}#"}
            ),
        ):
            data = {k: v for k, v in item.items() if k not in ("pk", "sk", "expires_at")}
            data["browser_seconds"] = int(data.pop("browser_ms", 0)) / 1000
            out.append(AttemptUsage.model_validate(data))
        return out

    def _query(self, **kwargs: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        kwargs["TableName"] = self._table
        while True:
            resp = self._db.query(**kwargs)
            out += [deserialize(i) for i in resp.get("Items", [])]
            last = resp.get("LastEvaluatedKey")
            if not last:
                return out
            kwargs["ExclusiveStartKey"] = last


def _summed(rows: Iterable[UsageRow]) -> list[UsageRow]:
    """One row per (tenant, day, workflow), its shards' counts added; a tenant's day first,
    then its workflows', as the unsharded items sorted."""
    out: dict[tuple[str, str, str], UsageRow] = {}
    for row in rows:
        key = (row.tenant_id, row.day, row.workflow)
        out[key] = out[key].add(row) if key in out else row
    return sorted(
        out.values(), key=lambda r: (r.tenant_id, r.day, r.workflow != ALL_WORKFLOWS, r.workflow)
    )


def _expiry(day: str) -> int:
    start = datetime.combine(date.fromisoformat(day), time(), tzinfo=UTC)
    return int(start.timestamp()) + USAGE_RETENTION_DAYS * _DAY_S
