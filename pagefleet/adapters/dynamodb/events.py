"""Run events in the jobs table, under the tenant's partition, so the jobs stream carries them.

Items (``pk = TENANT#<tenant>``):

- ``sk = EVT#<job>#<last seq, 10 digits>``: one batch of events (``events_z``: their JSON
  list, zlib-compressed; ``events``: the text itself where compressing saved nothing or the
  item was written before, else ``[]``; ``first_seq``, ``last_seq``), split so that an
  item stays far below 400 KB. Keyed by its last sequence number, so the events after N
  are exactly the items with a key above N.
- ``sk = EVTSEQ#<job>``: the job's sequence counter (``seq``) and how many bounded events
  were reserved (``bounded``); an atomic ADD hands each writer its own numbers.

Every item carries ``expires_at`` (the table's TTL attribute), the job's expiry.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pagefleet.adapters.dynamodb.codec import deserialize, serialize, tenant_pk, to_json

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

EVENTS_PREFIX = "EVT#"
COUNTER_PREFIX = "EVTSEQ#"
SEQ_DIGITS = 10
_TOP = "9" * SEQ_DIGITS
# Well below DynamoDB's 400 KB item limit: the stream record carries the image too.
ITEM_EVENTS_MAX_BYTES = 200 * 1024


def events_sk(job_id: str, seq: int) -> str:
    return f"{EVENTS_PREFIX}{job_id}#{seq:0{SEQ_DIGITS}d}"


def counter_sk(job_id: str) -> str:
    return f"{COUNTER_PREFIX}{job_id}"


@dataclass(frozen=True)
class EventsItem:
    """One stored batch of a job's events, as the stream or a query returns it."""

    tenant_id: str
    job_id: str
    events: list[dict[str, Any]]


def packed(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's events as its item keeps them. DynamoDB bills a write a unit per KB of the
    item: a plain job's one batch is ~1.3 KB of JSON (two units) and ~0.5 KB compressed.

    A compressed batch also says ``"events": "[]"``: a release from before reads it (beside
    new workers for minutes in a deploy, or after a rollback) as a batch of no events, not
    as a broken item."""
    text = to_json(events).encode()
    compressed = zlib.compress(text, 6)
    if len(compressed) < len(text):
        return {"events_z": compressed, "events": "[]"}
    return {"events": text.decode()}


def _binary(value: bytes | str) -> bytes:
    """A binary attribute's bytes: boto3's client gives bytes, a Lambda stream event base64
    text."""
    return base64.b64decode(value) if isinstance(value, str) else bytes(value)


def events_item(image: Mapping[str, Any]) -> EventsItem | None:
    """An events item from its DynamoDB image (stream or query), None for other items."""
    if not str((image.get("sk") or {}).get("S", "")).startswith(EVENTS_PREFIX):
        return None
    data = deserialize({k: v for k, v in image.items() if k != "events_z"})
    if "events_z" in image:
        text = zlib.decompress(_binary(image["events_z"]["B"]))
    else:
        text = data["events"].encode()
    return EventsItem(
        tenant_id=str(data["pk"]).removeprefix("TENANT#"),
        job_id=str(data["job_id"]),
        events=list(json.loads(text)),
    )


def chunks(events: list[dict[str, Any]], max_bytes: int) -> list[list[dict[str, Any]]]:
    """Consecutive runs of events whose JSON stays within ``max_bytes`` (at least one each)."""
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 2
    for event in events:
        cost = len(to_json(event).encode()) + 1
        if current and size + cost > max_bytes:
            out.append(current)
            current, size = [], 2
        current.append(event)
        size += cost
    if current:
        out.append(current)
    return out


class DynamoEventStore:
    """``EventStore`` over the jobs table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def allocate(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        resp = self._db.update_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": counter_sk(job_id)}),
            UpdateExpression="ADD seq :n, bounded :b SET expires_at = :e, job_id = :j",
            ExpressionAttributeValues=serialize(
                {":n": count, ":b": bounded, ":e": expires_at, ":j": job_id}
            ),
            # ALL_NEW: an ADD of 0 leaves an attribute out of UPDATED_NEW.
            ReturnValues="ALL_NEW",
        )
        new = deserialize(resp["Attributes"])
        last = int(new["seq"])
        return last - count + 1, int(new["bounded"])

    def put(
        self,
        tenant_id: str,
        job_id: str,
        events: list[dict[str, Any]],
        *,
        expires_at: int,
        attempt: int,
    ) -> None:
        for part in chunks(events, ITEM_EVENTS_MAX_BYTES):
            first, last = int(part[0]["seq"]), int(part[-1]["seq"])
            self._db.put_item(
                TableName=self._table,
                Item=serialize(
                    {
                        "pk": tenant_pk(tenant_id),
                        "sk": events_sk(job_id, last),
                        "job_id": job_id,
                        "first_seq": first,
                        "last_seq": last,
                        "count": len(part),
                        "attempt": attempt,
                        **packed(part),
                        "expires_at": expires_at,
                    }
                ),
            )

    def page(
        self, tenant_id: str, job_id: str, *, after: int, limit: int, now: int
    ) -> tuple[list[dict[str, Any]], bool]:
        out: list[dict[str, Any]] = []
        start = max(0, after + 1)
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            # DynamoDB deletes expired items within days, not at once: hide them meanwhile.
            "FilterExpression": "attribute_not_exists(expires_at) OR expires_at > :now",
            "ExpressionAttributeValues": serialize(
                {
                    ":pk": tenant_pk(tenant_id),
                    ":lo": events_sk(job_id, start),
                    ":hi": f"{EVENTS_PREFIX}{job_id}#{_TOP}",
                    ":now": now,
                }
            ),
            "ConsistentRead": True,
        }
        while True:
            resp = self._db.query(**kwargs)
            for raw in resp.get("Items", []):
                item = events_item(raw)
                if item is None:
                    continue
                for event in item.events:
                    if int(event["seq"]) <= after:
                        continue
                    if len(out) == limit:
                        return out, True
                    out.append(event)
            last_key = resp.get("LastEvaluatedKey")
            if not last_key:
                return out, False
            if len(out) == limit:
                return out, True  # there may be more; the next page says
            kwargs["ExclusiveStartKey"] = last_key
