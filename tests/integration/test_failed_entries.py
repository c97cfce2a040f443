"""SQS's and EventBridge's batch calls with an entry that failed (``devstack.failed_entries``):
the rule on, against real boto3 calls, and off (moto as it is, which does every valid
entry); and our senders telling the failed entry, to be sent again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from devstack.strict_aws import LENIENT, StrictRules, at_least_once, made, rules_in_force
from pagefleet.adapters.notify import EventBridgeBus, SqsWebhookQueue
from pagefleet.adapters.sqs import delete_together
from pagefleet.notify.ports import BusEvent
from tests.conftest import aws_client

# Only the rule under test, every batch of two entries or more.
EVERY = StrictRules(queue_settle_s=0, batch_entry_failure_share=1)


def _entries(n: int) -> list[dict[str, str]]:
    return [{"Id": f"e{i}", "MessageBody": f"m{i}"} for i in range(n)]


def _bodies(sqs: Any, url: str) -> list[str]:
    """Every message waiting in the queue (received for ten minutes)."""
    seen: list[str] = []
    while got := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
    ).get("Messages", []):
        seen += [m["Body"] for m in got]
    return sorted(seen)


@pytest.fixture
def sqs(provisioned: Provisioned) -> Any:
    return aws_client("sqs")


@pytest.fixture
def url(sqs: Any, request: pytest.FixtureRequest) -> str:
    with rules_in_force(LENIENT):
        return str(sqs.create_queue(QueueName=f"fe-{request.node.name[5:40]}")["QueueUrl"])


def test_the_share_is_off_by_default_and_on_with_the_duplicates() -> None:
    assert StrictRules().batch_entry_failure_share == 0
    assert at_least_once().batch_entry_failure_share == at_least_once().sqs_duplicate_share > 0


def test_a_send_batch_fails_its_last_entry_and_sends_the_rest(sqs: Any, url: str) -> None:
    with rules_in_force(EVERY):
        answer = sqs.send_message_batch(QueueUrl=url, Entries=_entries(3))
    assert sorted(s["Id"] for s in answer["Successful"]) == ["e0", "e1"]
    [failed] = answer["Failed"]
    assert (failed["Id"], failed["SenderFault"], failed["Code"]) == ("e2", False, "InternalError")
    assert _bodies(sqs, url) == ["m0", "m1"]
    with rules_in_force(LENIENT):  # moto as it is sends every valid entry
        assert not sqs.send_message_batch(QueueUrl=url, Entries=_entries(3)).get("Failed")
    assert _bodies(sqs, url) == ["m0", "m1", "m2"]


def test_a_delete_batch_fails_its_last_entry_and_leaves_that_message(sqs: Any, url: str) -> None:
    with rules_in_force(LENIENT):
        sqs.send_message_batch(QueueUrl=url, Entries=_entries(3))
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
    handles = [m["ReceiptHandle"] for m in received["Messages"]]
    assert len(handles) == 3
    with rules_in_force(EVERY):
        refused = delete_together(sqs, url, handles)
    assert refused == [(handles[2], False)]  # not the sender's fault: worth sending again
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handles[2], VisibilityTimeout=0)
    [left] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert left["Body"] == received["Messages"][2]["Body"]


def test_a_put_events_fails_its_last_entry_and_puts_the_rest(sqs: Any, url: str) -> None:
    events = aws_client("events")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    events.put_rule(Name="fe-rule", EventPattern=json.dumps({"source": ["fe.test"]}))
    events.put_targets(Rule="fe-rule", Targets=[{"Id": "q", "Arn": arn["QueueArn"]}])
    bus = EventBridgeBus(events)
    sent = [BusEvent(source="fe.test", detail_type="t", detail={"n": n}) for n in range(3)]
    with rules_in_force(EVERY):
        told = bus.put_many(sent)
    assert told[:2] == [None, None] and told[2] is not None and "InternalFailure" in told[2]
    assert sorted(json.loads(b)["detail"]["n"] for b in _bodies(sqs, url)) == [0, 1]


def test_our_webhook_sender_tells_the_failed_entry(provisioned: Provisioned) -> None:
    queue = SqsWebhookQueue(aws_client("sqs"), provisioned.webhook_queue_url)
    with rules_in_force(EVERY):
        told = queue.send_many([{"n": n} for n in range(4)])
    assert told[:3] == [None] * 3 and told[3] is not None and "InternalError" in told[3]


def test_what_the_rules_made_is_counted(sqs: Any, url: str) -> None:
    with rules_in_force(EVERY):
        for _ in range(3):
            sqs.send_message_batch(QueueUrl=url, Entries=_entries(2))
        counted = made()
    assert counted["batches with an entry failed"] == 3
    assert counted["messages delivered twice"] == counted["batches left part done"] == 0


def test_a_batch_of_one_is_done_and_a_share_counts_batches(sqs: Any, url: str) -> None:
    with rules_in_force(EVERY):
        assert not sqs.send_message_batch(QueueUrl=url, Entries=_entries(1)).get("Failed")
    with rules_in_force(StrictRules(queue_settle_s=0, batch_entry_failure_share=0.5)):
        failed = [
            bool(sqs.send_message_batch(QueueUrl=url, Entries=_entries(2)).get("Failed"))
            for _ in range(4)
        ]
    assert failed == [False, True, False, True]


def test_batches_aws_refuses_are_still_refused_whole(sqs: Any, url: str) -> None:
    over = _entries(11)
    bad = [*_entries(1), {"Id": "not valid!", "MessageBody": "m"}]
    twice = [*_entries(2), {"Id": "e0", "MessageBody": "m"}]
    codes = []
    with rules_in_force(EVERY):
        for entries in (over, bad, twice):
            with pytest.raises(ClientError) as refused:
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
            codes.append(str(refused.value.response["Error"]["Code"]).rsplit(".", 1)[-1])
    assert codes == [
        "TooManyEntriesInBatchRequest",
        "InvalidBatchEntryId",
        "BatchEntryIdsNotDistinct",
    ]
    assert _bodies(sqs, url) == []
