"""The embedded AWS (moto server patched by ``devstack.embedded_aws``) keeps
DynamoDB's transaction semantics: all or nothing, whatever else the table holds; and its
queries, answered from one partition, page and order as DynamoDB's do."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.codec import idempotency_sk, job_sk, tenant_pk
from pagefleet.errors import IdempotencyConflict
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.service import JobServices, submit_job
from tests.conftest import aws_client

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


def _item(table: str, pk: str, sk: str) -> dict | None:
    reply = aws_client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    )
    return reply.get("Item")


def test_a_cancelled_transaction_writes_nothing(provisioned: Provisioned) -> None:
    db = aws_client("dynamodb")
    table = provisioned.jobs_table
    db.put_item(TableName=table, Item={"pk": {"S": "T#x"}, "sk": {"S": "taken"}, "v": {"S": "0"}})
    db.put_item(TableName=table, Item={"pk": {"S": "T#x"}, "sk": {"S": "kept"}, "v": {"S": "1"}})

    with pytest.raises(ClientError) as refused:
        db.transact_write_items(
            TransactItems=[
                # Would succeed on its own: it must not survive the cancellation.
                {"Put": {"TableName": table, "Item": {"pk": {"S": "T#x"}, "sk": {"S": "new"}}}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": {"pk": {"S": "T#x"}, "sk": {"S": "kept"}},
                        "UpdateExpression": "SET v = :two",
                        "ExpressionAttributeValues": {":two": {"S": "2"}},
                    }
                },
                {
                    "Put": {
                        "TableName": table,
                        "Item": {"pk": {"S": "T#x"}, "sk": {"S": "taken"}, "v": {"S": "9"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _item(table, "T#x", "new") is None
    assert _item(table, "T#x", "kept")["v"] == {"S": "1"}  # type: ignore[index]
    assert _item(table, "T#x", "taken")["v"] == {"S": "0"}  # type: ignore[index]


def test_a_reused_idempotency_key_leaves_no_second_job(
    svc: JobServices, provisioned: Provisioned
) -> None:
    first = submit_job(svc, "t", REQUEST, idempotency_key="k-1").job
    other = REQUEST.model_copy(update={"max_attempts": 2})
    record = first.model_copy(update={"job_id": "01jobthatmustnotexist0000000", "request": other})
    with pytest.raises(IdempotencyConflict):
        svc.store.create(record, idempotency_fingerprint=other.fingerprint())

    table = provisioned.jobs_table
    assert _item(table, tenant_pk("t"), job_sk(record.job_id)) is None
    key = _item(table, tenant_pk("t"), idempotency_sk("k-1"))
    assert key is not None and key["job_id"] == {"S": first.job_id}
    # Submit stores the request with its defaults settled (the tenant's trace mode), so the
    # stored job is compared with what submit stored, and the key still answers a resubmission
    # of the same body (fingerprinted as sent) with that job.
    assert svc.store.get("t", first.job_id).request == first.request
    again = submit_job(svc, "t", REQUEST, idempotency_key="k-1")
    assert (again.job.job_id, again.created) == (first.job_id, False)


def test_a_query_reads_its_partition_in_order_and_pages_through_it(
    provisioned: Provisioned,
) -> None:
    db = aws_client("dynamodb")
    table = provisioned.jobs_table
    for pk in ("T#q", "T#other"):
        for n in range(12):
            db.put_item(
                TableName=table,
                Item={"pk": {"S": pk}, "sk": {"S": f"{'EDGE' if n % 2 else 'JOB'}#{n:02d}"}},
            )

    def keys(**query: object) -> list[str]:
        found: list[str] = []
        kwargs: dict = {"TableName": table, **query}
        while True:
            reply = db.query(**kwargs)
            found += [item["sk"]["S"] for item in reply["Items"]]
            if "LastEvaluatedKey" not in reply:
                return found
            kwargs["ExclusiveStartKey"] = reply["LastEvaluatedKey"]

    edges = [f"EDGE#{n:02d}" for n in range(1, 12, 2)]
    by_prefix = {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :e)",
        "ExpressionAttributeValues": {":p": {"S": "T#q"}, ":e": {"S": "EDGE#"}},
    }
    assert keys(**by_prefix) == edges
    assert keys(**by_prefix, Limit=4) == edges
    assert keys(**by_prefix, Limit=4, ScanIndexForward=False) == edges[::-1]
    whole = keys(
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "T#q"}},
        Limit=5,
    )
    assert whole == sorted(whole) and len(whole) == 12
    between = keys(
        KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
        ExpressionAttributeValues={
            ":p": {"S": "T#q"},
            ":a": {"S": "JOB#04"},
            ":b": {"S": "JOB#08"},
        },
    )
    assert between == ["JOB#04", "JOB#06", "JOB#08"]
    assert (
        keys(
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "T#none"}},
        )
        == []
    )


def every_type(key: dict[str, Any]) -> dict[str, Any]:
    """An item with an attribute of every scalar, document and nested type (sets aside)."""
    return {
        **key,
        "s": {"S": "text é"},
        "n": {"N": "12.5"},
        "b": {"B": b"\x00\xffbytes"},
        "t": {"BOOL": True},
        "z": {"NULL": True},
        "l": {"L": [{"S": "a"}, {"N": "1"}]},
        "m": {"M": {"inner": {"S": "x"}, "deep": {"M": {"k": {"BOOL": False}}}}},
    }


def test_items_of_every_attribute_type_come_back_as_written(provisioned: Provisioned) -> None:
    # Item answers skip moto's shape serializer when they are plain JSON: each type must
    # still read back exactly, through every item operation.
    db = aws_client("dynamodb")
    table = provisioned.jobs_table
    key = {"pk": {"S": "T#types"}, "sk": {"S": "all"}}
    item: dict[str, Any] = {
        **every_type(key),
        "ss": {"SS": ["x", "y"]},
        "ns": {"NS": ["1", "2"]},
        "bs": {"BS": [b"\x01", b"\x02"]},
    }
    db.put_item(TableName=table, Item=item)

    def same(found: dict) -> None:
        for name in ("ss", "ns", "bs"):
            kind = next(iter(item[name]))
            assert sorted(found[name][kind]) == sorted(item[name][kind])
        plain = {k: v for k, v in item.items() if k not in ("ss", "ns", "bs")}
        assert {k: v for k, v in found.items() if k not in ("ss", "ns", "bs")} == plain

    same(db.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"])
    (queried,) = db.query(
        TableName=table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "T#types"}},
    )["Items"]
    same(queried)
    batch = db.batch_get_item(RequestItems={table: {"Keys": [key]}})
    same(batch["Responses"][table][0])
    updated = db.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "13"}},
        ReturnValues="ALL_NEW",
    )["Attributes"]
    assert updated["n"] == {"N": "13"} and updated["b"] == {"B": b"\x00\xffbytes"}
    old = db.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD")["Attributes"]
    assert old["m"] == item["m"]
    assert "Item" not in db.get_item(TableName=table, Key=key, ConsistentRead=True)


def test_stream_records_carry_every_attribute_type_and_their_time(
    provisioned: Provisioned,
) -> None:
    # GetRecords answers skip moto's shape serializer too: images and times must read back.
    db = aws_client("dynamodb")
    streams = aws_client("dynamodbstreams")
    table = provisioned.jobs_table
    key = {"pk": {"S": "T#stream"}, "sk": {"S": "all"}}
    # One member per set: a stream image's set order is not the written one.
    item: dict[str, Any] = {**every_type(key), "bs": {"BS": [b"\x01"]}}
    db.put_item(TableName=table, Item=item)
    db.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "13"}},
    )
    arn = db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = [
        r
        for r in streams.get_records(ShardIterator=iterator)["Records"]
        if r["dynamodb"]["Keys"] == key
    ]

    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY"]
    inserted, modified = (r["dynamodb"] for r in records)
    assert inserted["NewImage"] == item
    assert modified["OldImage"] == item and modified["NewImage"] == {**item, "n": {"N": "13"}}
    assert inserted["ApproximateCreationDateTime"].tzinfo is not None


def test_an_update_expression_sent_again_applies_its_own_values(provisioned: Provisioned) -> None:
    """The embedded AWS parses each update expression once: every later use must still apply
    its own values, functions and paths, and a bad expression must still be refused."""
    db = aws_client("dynamodb")
    table = provisioned.jobs_table
    expression = "SET v = :v, n = if_not_exists(n, :zero) + :one, tags.#k = :v REMOVE gone"
    for sk in ("first", "second"):
        db.put_item(
            TableName=table,
            Item={"pk": {"S": "T#u"}, "sk": {"S": sk}, "gone": {"S": "x"}, "tags": {"M": {}}},
        )
    for sk, value, times in (("first", "a", 1), ("second", "b", 3), ("first", "c", 1)):
        for _ in range(times):
            db.update_item(
                TableName=table,
                Key={"pk": {"S": "T#u"}, "sk": {"S": sk}},
                UpdateExpression=expression,
                ExpressionAttributeNames={"#k": f"k-{value}"},
                ExpressionAttributeValues={
                    ":v": {"S": value},
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                },
            )
    first, second = _item(table, "T#u", "first"), _item(table, "T#u", "second")
    assert first is not None and second is not None
    assert (first["v"], first["n"], "gone" in first) == ({"S": "c"}, {"N": "2"}, False)
    assert first["tags"] == {"M": {"k-a": {"S": "a"}, "k-c": {"S": "c"}}}
    assert (second["v"], second["n"]) == ({"S": "b"}, {"N": "3"})
    assert second["tags"] == {"M": {"k-b": {"S": "b"}}}
    with pytest.raises(ClientError) as refused:
        db.update_item(
            TableName=table,
            Key={"pk": {"S": "T#u"}, "sk": {"S": "first"}},
            UpdateExpression="SET v = = :v",
            ExpressionAttributeValues={":v": {"S": "z"}},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_a_message_past_its_queue_retention_period_is_not_handed_out() -> None:
    """Receives read the retention period from the queue itself (not from all its
    attributes): a message older than the period still never comes back."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    from devstack.embedded_aws import prepare_moto

    prepare_moto()
    backend = sqs_backends[DEFAULT_ACCOUNT_ID]["eu-west-3"]
    backend.create_queue("retention-check", MessageRetentionPeriod="60")
    old = backend.send_message("retention-check", "old")
    old.sent_timestamp -= 61_000  # sent 61 s ago, past the 60 s period

    def receive() -> list[str]:
        got = backend.receive_message(
            "retention-check", count=10, wait_seconds_timeout=0, visibility_timeout=30
        )
        return [m.body for m in got]

    assert receive() == []
    backend.send_message("retention-check", "fresh")
    assert receive() == ["fresh"]
    backend.delete_queue("retention-check")


def test_sqs_answers_are_unchanged_where_the_queue_is_not_counted(
    provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A standard queue's send and a GetQueueAttributes no longer build the approximate
    counts (a pass over every message) per send or per name asked for; what they answer is
    what moto answered."""
    from moto.sqs.models import Queue

    counted: list[str] = []
    original = Queue.approximate_number_of_messages_not_visible

    def not_visible(self: Any) -> int:
        counted.append(self.name)
        return int(original.fget(self))  # type: ignore[attr-defined]

    monkeypatch.setattr(Queue, "approximate_number_of_messages_not_visible", property(not_visible))
    sqs = aws_client("sqs")
    url = sqs.create_queue(QueueName="counted")["QueueUrl"]
    fifo = sqs.create_queue(
        QueueName="counted.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    assert counted == []  # a standard queue's send reads no count
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=60)
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    counted.clear()
    answer = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert answer == dict(zip(names, ["1", "2", "1"], strict=True))
    assert len(counted) == 1  # once for the call, not per name
    # A FIFO queue still reads its ContentBasedDeduplication: the same body twice is one.
    for _ in range(2):
        sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g")
    got = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in got] == ["same"]
