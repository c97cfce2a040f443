"""A batch of run events is kept compressed: one DynamoDB write unit for a plain job's batch,
read back the same by the events route and by the stream reader from a Lambda's event."""

from __future__ import annotations

from typing import Any

from bench.write_units import item_size
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.codec import serialize, tenant_pk, to_json
from pagefleet.adapters.dynamodb.events import DynamoEventStore, events_sk
from pagefleet.adapters.dynamodb.stream import event_writes
from pagefleet.runtime import RUNTIME
from tests.integration.test_stream_checkpoints import stream_records

JOB = "01jt8k3m5n7p9q2r4s6v8w0x1y"
EXPIRES = 1_900_000_000
NOW = 1_800_000_000
AT = "2026-12-07T22:39:51.643Z"
GOTO = "goto(url='http://127.0.0.1:40597/', wait_until='load')"
EXTRACT = "extract(name='title', selector='h1', kind='text', many=False)"


def plain_jobs_events() -> list[dict[str, Any]]:
    """The eight events a plain two-step job writes in its one batch (1.3 KB of JSON)."""
    step = {"attempt": 1, "of": 2}
    return [
        {"at": AT, "type": "state", "attempt": 1, "status": "running", "seq": 1},
        {
            "at": AT,
            "type": "log",
            "attempt": 1,
            "level": "info",
            "message": "job started",
            "seq": 2,
        },
        {
            **step,
            "at": AT,
            "type": "step_started",
            "index": 0,
            "path": "0",
            "action": "goto",
            "label": GOTO,
            "seq": 3,
        },
        {"at": AT, "type": "navigation", "attempt": 1, "url": "http://127.0.0.1:40597/", "seq": 4},
        {
            **step,
            "at": AT,
            "type": "step_finished",
            "index": 0,
            "path": "0",
            "action": "goto",
            "label": GOTO,
            "duration_ms": 93,
            "outcome": "ok",
            "cost_usd": 6.57e-07,
            "seq": 5,
        },
        {
            **step,
            "at": AT,
            "type": "step_started",
            "index": 1,
            "path": "1",
            "action": "extract",
            "label": EXTRACT,
            "seq": 6,
        },
        {
            **step,
            "at": AT,
            "type": "step_finished",
            "index": 1,
            "path": "1",
            "action": "extract",
            "label": EXTRACT,
            "duration_ms": 62,
            "outcome": "ok",
            "cost_usd": 4.34e-07,
            "seq": 7,
        },
        {"at": AT, "type": "state", "attempt": 1, "status": "succeeded", "seq": 8},
    ]


def _item(table: str, last_seq: int) -> dict[str, Any]:
    key = serialize({"pk": tenant_pk("t"), "sk": events_sk(JOB, last_seq)})
    item: dict[str, Any] = RUNTIME.client("dynamodb").get_item(TableName=table, Key=key)["Item"]
    return item


def test_a_plain_jobs_batch_is_one_write_unit_and_reads_back_whole(
    provisioned: Provisioned,
) -> None:
    store = DynamoEventStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    events = plain_jobs_events()
    assert len(to_json(events)) > 1024  # as text, two units
    store.put("t", JOB, events, expires_at=EXPIRES, attempt=1)
    item = _item(provisioned.jobs_table, 8)
    assert item_size(item) <= 1024
    assert item["events"] == {"S": "[]"}  # a release from before reads no events, not an error
    assert store.page("t", JOB, after=0, limit=100, now=NOW) == (events, False)


def test_a_batch_written_as_text_before_still_reads(provisioned: Provisioned) -> None:
    events = plain_jobs_events()
    RUNTIME.client("dynamodb").put_item(
        TableName=provisioned.jobs_table,
        Item=serialize(
            {
                "pk": tenant_pk("t"),
                "sk": events_sk(JOB, 8),
                "job_id": JOB,
                "first_seq": 1,
                "last_seq": 8,
                "count": 8,
                "attempt": 1,
                "events": to_json(events),
                "expires_at": EXPIRES,
            }
        ),
    )
    store = DynamoEventStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    assert store.page("t", JOB, after=4, limit=100, now=NOW) == (events[4:], False)


def test_the_stream_reader_reads_a_batch_from_the_lambda_event_as_aws_sends_it(
    provisioned: Provisioned,
) -> None:
    """A Lambda's stream event carries a binary attribute as base64 text (boto3 would have
    decoded it): the local event source hands it over the same way."""
    events = plain_jobs_events()
    DynamoEventStore(RUNTIME.client("dynamodb"), provisioned.jobs_table).put(
        "t", JOB, events, expires_at=EXPIRES, attempt=1
    )
    _, records = stream_records(provisioned.jobs_table)
    (record,) = [r for r in records if r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVT#")]
    assert isinstance(record["dynamodb"]["NewImage"]["events_z"]["B"], str)
    (written,) = event_writes([record])
    assert (written.tenant_id, written.job_id, written.events) == ("t", JOB, events)
