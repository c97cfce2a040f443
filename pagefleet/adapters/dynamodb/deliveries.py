"""Webhook delivery attempts and notification marks (jobs table), tenants' defaults (tenants table).

Jobs table, under the tenant's partition (each item has ``expires_at``, the job's expiry):

- ``sk = DLV#<job>#<time ms, 13 digits>#<attempt, 3 digits>``: one POST, in time order;
- ``sk = NTF#<job>#<mark>``: a notification already handed on (webhook queued, event put),
  so a stream batch delivered twice does not notify twice; a batch's marks are read and
  written together (BatchGetItem, BatchWriteItem: ``pagefleet.adapters.dynamodb.batches``).

Tenants table: ``pk = TENANT#<tenant>, sk = NOTIFY`` holds the tenant's default webhook (no
``tenant_id`` attribute: the ``by_tenant`` index lists API keys only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pagefleet.adapters.dynamodb.batches import get_all, write_all
from pagefleet.adapters.dynamodb.codec import deserialize, read_item, serialize, tenant_pk
from pagefleet.notify.ports import DeliveryAttempt, Mark

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DELIVERY_PREFIX = "DLV#"
MARK_PREFIX = "NTF#"
ATTEMPTS_LISTED_MAX = 200


def delivery_sk(job_id: str, attempt: DeliveryAttempt) -> str:
    at = datetime.fromisoformat(attempt.at.replace("Z", "+00:00"))
    return f"{DELIVERY_PREFIX}{job_id}#{int(at.timestamp() * 1000):013d}#{attempt.attempt:03d}"


class DynamoDeliveries:
    """``Deliveries`` over the jobs table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def record(
        self, tenant_id: str, job_id: str, attempt: DeliveryAttempt, *, expires_at: int
    ) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=serialize(
                {
                    "pk": tenant_pk(tenant_id),
                    "sk": delivery_sk(job_id, attempt),
                    "job_id": job_id,
                    "attempt_json": attempt.model_dump_json(exclude_none=True),
                    "expires_at": expires_at,
                }
            ),
        )

    def attempts(self, tenant_id: str, job_id: str) -> list[DeliveryAttempt]:
        resp = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=serialize(
                {":pk": tenant_pk(tenant_id), ":prefix": f"{DELIVERY_PREFIX}{job_id}#"}
            ),
            ScanIndexForward=False,  # the newest first, then shown oldest first
            Limit=ATTEMPTS_LISTED_MAX,
            ConsistentRead=True,
        )
        items = [deserialize(i) for i in resp.get("Items", [])]
        return [DeliveryAttempt.model_validate(json.loads(i["attempt_json"])) for i in items][::-1]

    def marked_many(self, marks: Sequence[Mark]) -> set[Mark]:
        items = get_all(self._db, self._table, [serialize(_mark_key(m)) for m in marks])
        found = {(str(i["pk"]), str(i["sk"])) for i in map(deserialize, items)}
        return {m for m in marks if tuple(_mark_key(m).values()) in found}

    def mark_many(self, marks: Sequence[Mark]) -> None:
        puts = [
            {
                "PutRequest": {
                    "Item": serialize(
                        {**_mark_key(m), "job_id": m.job_id, "expires_at": m.expires_at}
                    )
                }
            }
            for m in marks
        ]
        write_all(self._db, self._table, puts)


def _mark_key(mark: Mark) -> dict[str, str]:
    return {"pk": tenant_pk(mark.tenant_id), "sk": f"{MARK_PREFIX}{mark.job_id}#{mark.name}"}


class DynamoNotifyDefaults:
    """``NotifyDefaults`` over the tenants table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def _key(self, tenant_id: str) -> dict[str, Any]:
        return serialize({"pk": tenant_pk(tenant_id), "sk": "NOTIFY"})

    def get(self, tenant_id: str) -> str | None:
        item = read_item(self._db, self._table, self._key(tenant_id))
        if item is None:
            return None
        value = deserialize(item).get("webhook")
        return str(value) if value else None

    def put(self, tenant_id: str, webhook: str | None) -> None:
        if webhook is None:
            self._db.delete_item(TableName=self._table, Key=self._key(tenant_id))
            return
        self._db.put_item(
            TableName=self._table,
            Item={**self._key(tenant_id), **serialize({"webhook": webhook})},
        )
