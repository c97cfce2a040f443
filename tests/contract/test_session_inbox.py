"""Workers' command inboxes and their registry, on the fakes and on SQS / DynamoDB as strict
as AWS: wake-ups taken once, an inbox usable when ``make`` returns, a removed one gone and
not listed, a dead worker's inbox told from a live one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.fakes.session_inbox import FakeInboxRegistry, FakeSessionInbox
from devstack.provision import Provisioned
from devstack.strict_aws import StrictRules, rules_in_force
from pagefleet.adapters.dynamodb.inboxes import DynamoInboxRegistry
from pagefleet.adapters.session_inbox import SqsSessionInbox
from pagefleet.browsing.inbox import Delivery, InboxRegistry, SessionInbox, Wakeup
from pagefleet.jobs.models import new_ulid
from pagefleet.runtime import RUNTIME
from pagefleet.specs.resources import inbox_name, inbox_queue_prefix

PREFIX = inbox_queue_prefix("contract")


def sqs_inbox(provisioned: Provisioned, client: Any = None) -> SqsSessionInbox:
    return SqsSessionInbox.beside(
        client or RUNTIME.client("sqs"),
        any_queue_url=next(iter(provisioned.queue_urls.values())),
    )


@pytest.fixture
def inbox(backend: str, request: pytest.FixtureRequest) -> SessionInbox:
    if backend == "fake":
        return FakeSessionInbox()
    return sqs_inbox(request.getfixturevalue("provisioned"))


@pytest.fixture
def made(inbox: SessionInbox) -> Iterator[str]:
    name = inbox_name("contract", new_ulid())
    inbox.make(name)
    yield name
    inbox.remove(name)


def wakeup(command_id: str | None = None, op: str = "command") -> Wakeup:
    return Wakeup.model_validate(
        {"id": new_ulid(), "op": op, "tenant_id": "t", "session_id": "s", "command_id": command_id}
    )


def received(inbox: SessionInbox, name: str, count: int, *, hidden_s: int = 60) -> list[Delivery]:
    got: list[Delivery] = []
    for _ in range(10):
        got += inbox.receive(name, wait_s=1, hidden_s=hidden_s)
        if len(got) >= count:
            break
    return got


def test_wakeups_are_taken_once_each(inbox: SessionInbox, made: str) -> None:
    sent = [wakeup("c1"), wakeup(op="close")]
    for one in sent:
        assert inbox.send(made, one)
    got = received(inbox, made, 2)
    assert sorted(d.wakeup.id for d in got if d.wakeup) == sorted(w.id for w in sent)
    assert inbox.receive(made, wait_s=0) == []  # hidden while they are handed on
    inbox.delete(made, [d.receipt for d in got])
    assert inbox.receive(made, wait_s=0) == []


def test_a_wakeup_not_deleted_comes_back_once_its_hidden_time_passed(
    inbox: SessionInbox, made: str
) -> None:
    """What a worker killed between a receive and its gathered delete leaves: a copy, which
    runs nothing (the ledger's claim); a delete made in time leaves none."""
    sent = wakeup("c1")
    inbox.send(made, sent)
    [first] = received(inbox, made, 1, hidden_s=1)
    assert inbox.receive(made, wait_s=0) == []  # hidden
    [again] = received(inbox, made, 1, hidden_s=60)
    assert again.wakeup == first.wakeup == sent
    inbox.delete(made, [again.receipt])
    time.sleep(1.2)
    assert inbox.receive(made, wait_s=0) == []


def test_ten_wakeups_are_deleted_in_one_request_and_no_more(inbox: SessionInbox, made: str) -> None:
    for i in range(11):
        inbox.send(made, wakeup(f"c{i}"))
    got = received(inbox, made, 11)
    assert len(got) == 11
    with pytest.raises(ValueError, match="at most 10"):
        inbox.delete(made, [d.receipt for d in got])  # SQS: TooManyEntriesInBatchRequest
    inbox.delete(made, [d.receipt for d in got[:10]])
    inbox.delete(made, [d.receipt for d in got[10:]])
    inbox.delete(made, [d.receipt for d in got[10:]])  # stale: no error
    inbox.delete(made, [])
    assert inbox.receive(made, wait_s=0) == []


def test_deletes_to_a_removed_inbox_are_no_error(inbox: SessionInbox) -> None:
    name = inbox_name("contract", new_ulid())
    inbox.make(name)
    inbox.send(name, wakeup("c"))
    got = received(inbox, name, 1)
    inbox.remove(name)  # the worker stopped: its gathered deletes go with the inbox
    inbox.delete(name, [d.receipt for d in got])


def test_a_removed_inbox_is_not_sent_to_nor_listed(inbox: SessionInbox) -> None:
    name = inbox_name("contract", new_ulid())
    inbox.make(name)
    assert name in [i.name for i in inbox.listed(PREFIX)]
    inbox.remove(name)
    inbox.remove(name)  # again: fine
    assert not inbox.send(name, wakeup("c"))  # its worker is gone: not delivered
    assert name not in [i.name for i in inbox.listed(PREFIX)]


def test_an_inbox_is_listed_with_when_it_was_made(inbox: SessionInbox, made: str) -> None:
    [found] = [i for i in inbox.listed(PREFIX) if i.name == made]
    assert abs(found.created_at - time.time()) < 600


@pytest.fixture
def registry(backend: str, request: pytest.FixtureRequest) -> InboxRegistry:
    if backend == "fake":
        return FakeInboxRegistry()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoInboxRegistry(RUNTIME.client("dynamodb"), provisioned.jobs_table)


def test_an_inbox_is_alive_while_renewed_and_not_once_dropped(registry: InboxRegistry) -> None:
    name = inbox_name("contract", new_ulid())
    assert not registry.alive(name, now=100.0)  # never registered
    registry.renew(name, until=200.0)
    assert registry.alive(name, now=100.0)
    assert not registry.alive(name, now=200.5)  # its worker stopped renewing
    registry.drop(name)
    assert not registry.alive(name, now=100.0)


# --- on SQS as strict as AWS: a queue is unusable in its first second ----------------------


def test_an_inbox_is_usable_the_moment_make_returns(provisioned: Provisioned) -> None:
    """AWS: wait at least one second after CreateQueue before using the queue. A worker's
    inbox is made once, at its start, and ``make`` returns only when it is usable, so no
    wake-up is ever refused as sent to a missing queue."""
    with rules_in_force(StrictRules(queue_settle_s=1.0)):
        inbox = sqs_inbox(provisioned)
        name = inbox_name("contract", new_ulid())
        inbox.make(name)
        try:
            assert inbox.send(name, wakeup("c"))  # at once
            got = inbox.receive(name, wait_s=1)
            assert [d.wakeup.command_id for d in got if d.wakeup] == ["c"]
        finally:
            inbox.remove(name)


class FlakyDeletes:
    """An SQS client whose first DeleteMessageBatch fails as a throttled call does."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def delete_message_batch(self, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed += 1
            error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
            raise ClientError(error, "DeleteMessageBatch")  # type: ignore[arg-type]
        return self._client.delete_message_batch(**kwargs)


def test_a_received_wakeup_is_deleted_even_when_a_delete_fails(
    provisioned: Provisioned,
) -> None:
    sqs = RUNTIME.client("sqs")
    flaky = FlakyDeletes(sqs)
    inbox = sqs_inbox(provisioned, flaky)
    name = inbox_name("contract", new_ulid())
    inbox.make(name)
    try:
        inbox.send(name, wakeup("c"))
        [got] = inbox.receive(name, wait_s=1)
        inbox.delete(name, [got.receipt])
        counts = sqs.get_queue_attributes(
            QueueUrl=inbox.url(name),
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        )["Attributes"]
        assert flaky.failed == 1
        assert counts == {
            "ApproximateNumberOfMessages": "0",
            "ApproximateNumberOfMessagesNotVisible": "0",
        }
    finally:
        inbox.remove(name)


def test_a_message_that_is_not_a_wakeup_is_received_to_be_deleted(
    provisioned: Provisioned,
) -> None:
    sqs = RUNTIME.client("sqs")
    inbox = sqs_inbox(provisioned)
    name = inbox_name("contract", new_ulid())
    inbox.make(name)
    try:
        sqs.send_message(QueueUrl=inbox.url(name), MessageBody="{not a wake-up")
        [got] = inbox.receive(name, wait_s=1)
        assert got.wakeup is None and got.receipt
        inbox.delete(name, [got.receipt])
        assert inbox.receive(name, wait_s=0) == []
    finally:
        inbox.remove(name)
