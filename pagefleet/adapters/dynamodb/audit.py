"""Audit records in the tenants table: partition ``AUDIT#<yyyy-mm>``, sort key the record's
ULID (time order), listed newest first month by month; each expires after
``AUDIT_RETENTION_DAYS``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pagefleet import ids
from pagefleet.adapters.dynamodb.codec import deserialize, serialize
from pagefleet.specs.resources import AUDIT_PK_PREFIX
from pagefleet.tenancy.audit import AuditRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _month_before(month: str) -> str:
    year, number = (int(part) for part in month.split("-"))
    return f"{year - 1}-12" if number == 1 else f"{year}-{number - 1:02d}"


class DynamoAuditLog:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def write(self, record: AuditRecord) -> None:
        item = record.model_dump(mode="json", exclude={"details"})
        item.update(
            {
                "pk": f"{AUDIT_PK_PREFIX}{record.month}",
                "sk": record.audit_id,
                # Free-form: kept as JSON text so any value (floats included) fits.
                "details": json.dumps(record.details, separators=(",", ":")),
                "expires_at": record.expires_at,
            }
        )
        self._db.put_item(TableName=self._table, Item=serialize(item))

    def recent(
        self, *, limit: int, before: str | None = None, months: int = 13
    ) -> list[AuditRecord]:
        """Newest first; ``before`` (an audit id, checked by the caller) continues a listing
        after that record."""
        start = (ids.ulid_time(before) if before else None) or datetime.now(UTC)
        month = start.strftime("%Y-%m")
        out: list[AuditRecord] = []
        for _ in range(months):
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": f"{AUDIT_PK_PREFIX}{month}"}},
                "ScanIndexForward": False,
                "Limit": limit - len(out),
            }
            if before:
                kwargs["KeyConditionExpression"] += " AND sk < :before"
                kwargs["ExpressionAttributeValues"][":before"] = {"S": before}
            resp = self._db.query(**kwargs)
            for item in resp.get("Items", []):
                data = deserialize(item)
                data["details"] = json.loads(data.get("details") or "{}")
                out.append(AuditRecord.model_validate(data))
            if len(out) >= limit:
                return out
            month = _month_before(month)
        return out
