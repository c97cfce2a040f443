"""A takeover's input batches in the jobs table, in the tenant's partition of the command
ledger (pagefleet.browsing.input_events): ``pk = SCMD#<tenant>`` (the worker reaches it only
as the job's tenant, like the session commands), ``sk = TKI#<job>#<takeover>#<seq>``, apart
from the commands' ``<session>#...`` keys. Each expires with ``expires_at`` (TTL)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import condition_failed, deserialize, serialize
from pagefleet.adapters.dynamodb.session_commands import ledger_pk
from pagefleet.browsing.input_events import InputRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PREFIX = "TKI#"


def input_sk(job_id: str, takeover_id: str, seq: int) -> str:
    return f"{PREFIX}{job_id}#{takeover_id}#{seq:010d}"


class DynamoTakeoverInputs:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def put(self, record: InputRecord) -> None:
        body = record.model_dump(mode="json", include={"frame", "events"})
        item = {
            "pk": ledger_pk(record.tenant_id),
            "sk": input_sk(record.job_id, record.takeover_id, record.seq),
            "body": json.dumps(body, separators=(",", ":")),
            "expires_at": record.expires_at,
        }
        try:
            self._db.put_item(
                TableName=self._table,
                Item=serialize(item),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if not condition_failed(exc):  # the same batch again: kept once
                raise

    def after(
        self, tenant_id: str, job_id: str, takeover_id: str, *, seq: int, limit: int = 20
    ) -> list[InputRecord]:
        out = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :low AND :high",
            ExpressionAttributeValues=serialize(
                {
                    ":pk": ledger_pk(tenant_id),
                    ":low": input_sk(job_id, takeover_id, seq + 1),
                    ":high": input_sk(job_id, takeover_id, 10**10 - 1),
                }
            ),
            ConsistentRead=True,
            Limit=limit,
        )
        return [_record(tenant_id, job_id, takeover_id, deserialize(i)) for i in out["Items"]]


def _record(tenant_id: str, job_id: str, takeover_id: str, item: dict[str, Any]) -> InputRecord:
    return InputRecord.model_validate(
        {
            **json.loads(item["body"]),
            "tenant_id": tenant_id,
            "job_id": job_id,
            "takeover_id": takeover_id,
            "seq": int(str(item["sk"]).rsplit("#", 1)[1]),
            "expires_at": int(item["expires_at"]),
        }
    )
