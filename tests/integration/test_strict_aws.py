"""The embedded AWS refuses what AWS refuses (``devstack.strict_aws``): each rule is shown
on, against real boto3 calls, and off (moto as it is), where it lets the fault through."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from devstack.strict_aws import (
    DYNAMODB_MAX_ITEM_BYTES,
    LENIENT,
    MADE_PATH,
    SQS_MAX_MESSAGE_BYTES,
    StrictRules,
    at_least_once,
    made,
    rules_in_force,
)
from tests.conftest import aws_client

GONE = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
# Only the rule under test: a queue settles at once unless the test says otherwise.
SETTLED = {"queue_settle_s": 0}


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


@pytest.fixture
def sqs(provisioned: Provisioned) -> Any:
    return aws_client("sqs")


@pytest.fixture
def strict() -> Iterator[None]:
    with rules_in_force(StrictRules()):
        yield


def _until(what: Any, *, within_s: float = 20) -> Any:
    """``what()`` once it stops raising ClientError (a bound, not a sleep)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return what()
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_the_rules_are_on_by_default_with_awss_limits() -> None:
    rules = StrictRules()
    assert rules.on and rules.queue_settle_s == 1.0
    assert rules.sqs_max_message_bytes == 262_144
    assert rules.dynamodb_max_item_bytes == 409_600
    assert rules.sqs_batch_max == 10
    assert rules.dynamodb_batch_write_max == 25
    assert rules.dynamodb_transaction_hold_s == 0.01
    assert rules.dynamodb_stale_read_share == 0  # on with the duplicates: at_least_once()
    assert at_least_once().dynamodb_stale_read_share == at_least_once().sqs_duplicate_share > 0
    assert rules.sqs_duplicate_share == 0
    assert StrictRules(on=False).effective() == LENIENT


# --- a queue is usable one second after CreateQueue -----------------------------------


def test_a_new_queue_answers_as_missing_until_it_settles(sqs: Any) -> None:
    with rules_in_force(StrictRules(queue_settle_s=60)):
        url = sqs.create_queue(QueueName="young")["QueueUrl"]
        for call in (
            lambda: sqs.send_message(QueueUrl=url, MessageBody="x"),
            lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0),
            lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
            lambda: sqs.get_queue_url(QueueName="young"),
            lambda: sqs.delete_queue(QueueUrl=url),
        ):
            with pytest.raises(ClientError) as refused:
                call()
            assert _code(refused) in GONE
        # Creating it again (idempotent) and listing it are answered as usual.
        assert sqs.create_queue(QueueName="young")["QueueUrl"] == url
        assert url in sqs.list_queues(QueueNamePrefix="young")["QueueUrls"]


def test_a_queue_becomes_usable_once_settled(sqs: Any) -> None:
    with rules_in_force(StrictRules(queue_settle_s=0.5)):
        url = sqs.create_queue(QueueName="settling")["QueueUrl"]
        _until(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        assert [m["Body"] for m in got] == ["x"]


def test_lenient_moto_lets_a_new_queue_be_used_at_once(sqs: Any) -> None:
    with rules_in_force(LENIENT):
        url = sqs.create_queue(QueueName="young")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x")  # what AWS may refuse


# --- a receive without VisibilityTimeout hides the message for the queue's default ------


def test_a_received_message_stays_hidden_for_the_queues_default(sqs: Any, strict: None) -> None:
    with rules_in_force(StrictRules(**SETTLED)):
        url = sqs.create_queue(QueueName="vis", Attributes={"VisibilityTimeout": "2"})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="once")
        first = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        assert len(first) == 1
        # Hidden: an emulator that applied no timeout would hand it out again here.
        assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
        again: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while not again and time.monotonic() < deadline:
            again = sqs.receive_message(
                QueueUrl=url, WaitTimeSeconds=2, AttributeNames=["ApproximateReceiveCount"]
            ).get("Messages", [])
        assert [m["MessageId"] for m in again] == [first[0]["MessageId"]]
        assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"


# --- standard queues deliver some messages twice ----------------------------------------


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=600
        ).get("Messages", [])
        if not got:
            return seen
        seen.extend(got)


def test_a_share_of_standard_queue_messages_is_delivered_twice(sqs: Any) -> None:
    with rules_in_force(StrictRules(queue_settle_s=0, sqs_duplicate_share=0.5)):
        url = sqs.create_queue(QueueName="dup")["QueueUrl"]
        for n in range(10):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
        seen = _drain(sqs, url)
    times = Counter(m["MessageId"] for m in seen)
    assert sorted(times.values()) == [1] * 5 + [2] * 5
    twice = [m for m in seen if times[m["MessageId"]] == 2]
    assert len({m["ReceiptHandle"] for m in twice}) == len(twice)  # each copy its own


def test_deleting_one_copy_leaves_the_other_to_be_delivered(sqs: Any) -> None:
    with rules_in_force(StrictRules(queue_settle_s=0, sqs_duplicate_share=1)):
        url = sqs.create_queue(QueueName="dup1")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="job")
        first = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, VisibilityTimeout=600)
        [taken] = first["Messages"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=taken["ReceiptHandle"])
        [again] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert again["MessageId"] == taken["MessageId"] and again["Body"] == "job"


def test_fifo_queues_and_the_default_deliver_once(sqs: Any) -> None:
    with rules_in_force(StrictRules(queue_settle_s=0, sqs_duplicate_share=1)):
        fifo = sqs.create_queue(
            QueueName="once.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        for n in range(3):
            sqs.send_message(QueueUrl=fifo, MessageBody=f"f{n}", MessageGroupId=f"g{n}")
        assert len(_drain(sqs, fifo)) == 3
    with rules_in_force(StrictRules(queue_settle_s=0)):
        url = sqs.create_queue(QueueName="plain")["QueueUrl"]
        for n in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
        assert len(_drain(sqs, url)) == 5


# --- SQS refuses a message over 256 KiB, attributes included -----------------------------


def _attr(value: str) -> dict[str, Any]:
    return {"note": {"DataType": "String", "StringValue": value}}


@pytest.mark.parametrize(
    ("body", "attributes"),
    [
        ("é" * (SQS_MAX_MESSAGE_BYTES // 2 + 1), None),  # 131,073 characters, 262,146 bytes
        ("x" * (SQS_MAX_MESSAGE_BYTES - 10), _attr("y" * 10)),  # over with its attribute
    ],
    ids=["utf8-body", "body-and-attributes"],
)
def test_a_message_over_256_kib_is_refused(sqs: Any, body: str, attributes: Any) -> None:
    extra = {"MessageAttributes": attributes} if attributes else {}
    with rules_in_force(StrictRules(**SETTLED)):
        url = sqs.create_queue(QueueName="big")["QueueUrl"]
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=url, MessageBody=body, **extra)
        assert _code(refused) == "InvalidParameterValue"
        assert "262144 bytes" in str(refused.value)
        sqs.send_message(QueueUrl=url, MessageBody="x" * SQS_MAX_MESSAGE_BYTES)  # at the limit
    with rules_in_force(LENIENT):
        sqs.send_message(QueueUrl=url, MessageBody=body, **extra)  # moto alone takes it


def test_a_batch_over_256_kib_in_total_is_refused(sqs: Any) -> None:
    entries = [{"Id": f"e{n}", "MessageBody": "x" * 140_000} for n in range(2)]
    with rules_in_force(StrictRules(**SETTLED)):
        url = sqs.create_queue(QueueName="batch")["QueueUrl"]
        with pytest.raises(ClientError) as refused:
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert "BatchRequestTooLong" in _code(refused)
    with rules_in_force(LENIENT):
        assert len(sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == 2


@pytest.mark.parametrize("operation", ["delete_message_batch", "change_message_visibility_batch"])
def test_a_batch_of_more_than_ten_entries_is_refused(sqs: Any, operation: str) -> None:
    def entries(handles: list[str]) -> list[dict[str, Any]]:
        extra = {"VisibilityTimeout": 0} if operation.startswith("change") else {}
        return [{"Id": str(n), "ReceiptHandle": h, **extra} for n, h in enumerate(handles)]

    with rules_in_force(StrictRules(**SETTLED)):
        url = sqs.create_queue(QueueName=f"many-{operation[:6]}")["QueueUrl"]
        for n in range(11):
            sqs.send_message(QueueUrl=url, MessageBody=str(n))
        handles: list[str] = []
        while len(handles) < 11:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60)
            handles += [m["ReceiptHandle"] for m in got.get("Messages", [])]
        with pytest.raises(ClientError) as refused:
            getattr(sqs, operation)(QueueUrl=url, Entries=entries(handles))
        assert _code(refused).endswith("TooManyEntriesInBatchRequest")
    with rules_in_force(LENIENT):  # moto as it is takes any number
        done = getattr(sqs, operation)(QueueUrl=url, Entries=entries(handles))
        assert len(done["Successful"]) == 11


def _puts(n: int) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {"pk": {"S": "T#b"}, "sk": {"S": f"w{i}"}}}} for i in range(n)]


def test_a_batch_of_more_than_25_writes_is_refused(provisioned: Provisioned) -> None:
    db, table = aws_client("dynamodb"), provisioned.jobs_table
    with rules_in_force(StrictRules(**SETTLED)):
        with pytest.raises(ClientError) as refused:
            db.batch_write_item(RequestItems={table: _puts(26)})
        assert _code(refused) == "ValidationException"
        assert "less than or equal to 25" in str(refused.value)
        assert "Item" not in db.get_item(
            TableName=table, Key={"pk": {"S": "T#b"}, "sk": {"S": "w0"}}
        )
        db.batch_write_item(RequestItems={table: _puts(25)})  # AWS's most: taken
    with rules_in_force(LENIENT):  # moto as it is writes any number
        assert not db.batch_write_item(RequestItems={table: _puts(26)})["UnprocessedItems"]


def test_more_than_100_keys_a_read_and_10_events_a_put_are_refused(
    provisioned: Provisioned,
) -> None:
    # moto refuses both as AWS does: no rule of ours, kept so.
    db, table = aws_client("dynamodb"), provisioned.jobs_table
    keys = [{"pk": {"S": "T#b"}, "sk": {"S": f"r{i}"}} for i in range(101)]
    with pytest.raises(ClientError) as refused:
        db.batch_get_item(RequestItems={table: {"Keys": keys}})
    assert _code(refused) == "ValidationException"
    entries = [{"Source": "s", "DetailType": "d", "Detail": "{}"} for _ in range(11)]
    with pytest.raises(ClientError) as refused:
        aws_client("events").put_events(Entries=entries)
    assert _code(refused) == "ValidationException"


# --- DynamoDB refuses an item over 400 KB, however it grows -------------------------------


def _get(table: str, sk: str) -> dict[str, Any] | None:
    reply = aws_client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": "T#big"}, "sk": {"S": sk}}, ConsistentRead=True
    )
    return reply.get("Item")


def _grow_nested(table: str) -> None:
    """An update that sets ``n``, then puts ~410 KB into a map inside the item."""
    aws_client("dynamodb").update_item(
        TableName=table,
        Key={"pk": {"S": "T#big"}, "sk": {"S": "nested"}},
        UpdateExpression="SET n = :n, m.big = :v",
        ExpressionAttributeValues={":v": {"S": "x" * 410_000}, ":n": {"N": "2"}},
    )


def test_an_update_that_grows_an_item_past_400_kb_is_refused_whole(
    provisioned: Provisioned,
) -> None:
    db, table = aws_client("dynamodb"), provisioned.jobs_table
    item = {"pk": {"S": "T#big"}, "sk": {"S": "nested"}, "m": {"M": {}}, "n": {"N": "1"}}
    db.put_item(TableName=table, Item=item)
    with rules_in_force(StrictRules()):
        with pytest.raises(ClientError) as refused:
            _grow_nested(table)
        assert _code(refused) == "ValidationException"
        assert "exceeded the maximum allowed size" in str(refused.value)
        assert _get(table, "nested") == item  # nothing of the update stays
    with rules_in_force(LENIENT):
        _grow_nested(table)  # moto alone stores an item AWS would refuse
        assert len(_get(table, "nested")["m"]["M"]["big"]["S"]) == 410_000  # type: ignore[index]


def test_an_update_refused_on_a_new_item_leaves_no_item(provisioned: Provisioned) -> None:
    db, table = aws_client("dynamodb"), provisioned.jobs_table

    def update(sk: str) -> None:
        db.update_item(
            TableName=table,
            Key={"pk": {"S": "T#big"}, "sk": {"S": sk}},
            UpdateExpression="SET a = :a, b = :b",
            ExpressionAttributeValues={":a": {"S": "1"}, ":b": {"S": "x" * 420_000}},
        )

    with rules_in_force(StrictRules()), pytest.raises(ClientError) as refused:
        update("fresh")
    assert _code(refused) == "ValidationException"
    assert _get(table, "fresh") is None
    with rules_in_force(LENIENT), pytest.raises(ClientError):
        update("moto")
    assert _get(table, "moto") is not None  # moto refuses, yet leaves the key written


def test_a_put_over_400_kb_is_refused(provisioned: Provisioned) -> None:
    db, table = aws_client("dynamodb"), provisioned.jobs_table
    over = {"pk": {"S": "T#big"}, "sk": {"S": "put"}, "v": {"S": "x" * DYNAMODB_MAX_ITEM_BYTES}}
    with rules_in_force(StrictRules()), pytest.raises(ClientError) as refused:
        db.put_item(TableName=table, Item=over)
    assert _code(refused) == "ValidationException"
    assert _get(table, "put") is None


# --- the local stack's embedded AWS applies them, as its environment says -----------------


@pytest.mark.parametrize(
    ("env", "refused"), [({}, True), ({"PAGEFLEET_STRICT_AWS_ON": "false"}, False)]
)
def test_the_embedded_aws_process_enforces_the_rules_unless_turned_off(
    tmp_path: Any, env: dict[str, str], refused: bool
) -> None:
    import boto3

    from devstack.constants import aws_env
    from devstack.loopback import reserve_loopback_port
    from devstack.moto_process import spawn_moto, wait_for_moto

    held = reserve_loopback_port()
    port = int(held.getsockname()[1])
    moto = spawn_moto(
        port, held, {"PAGEFLEET_STRICT_AWS_QUEUE_SETTLE_S": "60", **env}, tmp_path / "moto.log"
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        assert wait_for_moto(moto, endpoint, 60) is None
        settings = aws_env(endpoint)
        sqs = boto3.client(
            "sqs",
            endpoint_url=endpoint,
            region_name=settings["AWS_DEFAULT_REGION"],
            aws_access_key_id=settings["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
        )
        url = sqs.create_queue(QueueName="fresh")["QueueUrl"]
        if refused:
            with pytest.raises(ClientError) as error:
                sqs.send_message(QueueUrl=url, MessageBody="x")
            assert _code(error) in GONE
        else:
            sqs.send_message(QueueUrl=url, MessageBody="x")
        # What the rules made, served for the chaos bench (none here: no share is set).
        told = httpx.get(endpoint + MADE_PATH, timeout=10).json()
        assert told == dict.fromkeys(made(), 0)
    finally:
        moto.stop(grace_s=5)


# --- our code on a queue in its first second -------------------------------------------


def test_an_event_source_started_as_its_queue_is_made_delivers_its_messages(sqs: Any) -> None:
    """The local stack started the webhook queue's event source in the queue's first
    second: its one call outside the poll loop (the queue's ARN) was refused and the
    thread ended, so no webhook was ever delivered (test_live_runs, test_monitors)."""
    from devstack.lambda_env import LambdaFunction
    from devstack.pollers import DeadLetterPoller

    bodies: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        bodies.extend(record["body"] for record in event["Records"])
        return {"batchItemFailures": []}

    with rules_in_force(StrictRules(queue_settle_s=1.0)):
        url = sqs.create_queue(QueueName="webhooks-young")["QueueUrl"]
        poller = DeadLetterPoller(
            {"webhooks": url}, wait_s=1, function=LambdaFunction("hooks", handler), aws=aws_client
        ).start()
        try:
            _until(lambda: sqs.send_message(QueueUrl=url, MessageBody="deliver me"))
            deadline = time.monotonic() + 60
            while poller.handled < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            poller.stop()
    assert bodies == ["deliver me"]
