"""Usage in its own table, tenant first (``pagefleet.specs.resources.USAGE_TABLE``).

Per attempt one marker ``ATTEMPT#<job>#<attempt>`` holds what the attempt used; in the same
transaction the counts are added to the tenant's day (``DAY#<day>#*``) and to its
workflow's day (``DAY#<day>#WF#<name>``). The marker's condition (it must not exist) makes a
retried write count nothing: the whole transaction is refused. Day totals carry the sparse
``by_day`` index key, so an operator lists every tenant's day in one query. Every item
expires after ``USAGE_RETENTION_DAYS``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import condition_failed, deserialize, serialize, tenant_pk
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


def day_sk(day: str, workflow: str = ALL_WORKFLOWS) -> str:
    return f"DAY#{day}#*" if workflow == ALL_WORKFLOWS else f"DAY#{day}#WF#{workflow}"


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
                day_sk(usage.day),
                {**base, "day_pk": f"DAY#{usage.day}", "day_sk": usage.tenant_id},
            ),
            add(day_sk(usage.day, usage.workflow), base),
        ]
        try:
            write_together(self._db, items)
        except ClientError as exc:
            if condition_failed(exc, item=0):
                return False
            raise
        return True

    def days(self, tenant_id: str, first: str, last: str) -> list[UsageRow]:
        return [
            _row(item)
            for item in self._query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :a AND :b",
                ExpressionAttributeValues=serialize(
                    {":pk": tenant_pk(tenant_id), ":a": f"DAY#{first}", ":b": f"DAY#{last}#~"}
                ),
            )
        ]

    def every_tenant(self, day: str) -> list[UsageRow]:
        return [
            _row(item)
            for item in self._query(
                IndexName="by_day",
                KeyConditionExpression="day_pk = :d",
                ExpressionAttributeValues=serialize({":d": f"DAY#{day}"}),
            )
        ]

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


def _expiry(day: str) -> int:
    start = datetime.combine(date.fromisoformat(day), time(), tzinfo=UTC)
    return int(start.timestamp()) + USAGE_RETENTION_DAYS * _DAY_S
