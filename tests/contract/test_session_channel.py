"""A browser session's channel (its command and answer queues), on the fake and on SQS:
commands in order and taken once, each answer to its own caller, a closed channel gone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.fakes.session_channel import FakeSessionChannel
from devstack.provision import Provisioned
from devstack.strict_aws import StrictRules, rules_in_force
from pagefleet.adapters.session_channel import SETTLE_S, SqsSessionChannel, settling
from pagefleet.browsing.channel import ChannelGone, SessionChannel
from pagefleet.browsing.models import Answer, Command
from pagefleet.jobs.models import new_ulid
from pagefleet.runtime import RUNTIME
from pagefleet.specs.resources import session_queue_prefix


@pytest.fixture
def channel(backend: str, request: pytest.FixtureRequest) -> SessionChannel:
    if backend == "fake":
        return FakeSessionChannel()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return SqsSessionChannel.beside(
        RUNTIME.client("sqs"),
        prefix=session_queue_prefix("contract"),
        any_queue_url=next(iter(provisioned.queue_urls.values())),
    )


@pytest.fixture
def opened(channel: SessionChannel) -> str:
    name = new_ulid()
    channel.open(name)
    return name


def test_commands_come_in_order_and_each_once(channel: SessionChannel, opened: str) -> None:
    first, second = (
        Command(id=new_ulid(), steps=[{"action": "reload"}]),
        Command(id=new_ulid(), op="close"),
    )
    channel.send_command(opened, first)
    channel.send_command(opened, second)
    assert channel.next_command(opened, wait_s=1) == first
    assert channel.next_command(opened, wait_s=1) == second
    assert channel.next_command(opened, wait_s=0) is None


def test_an_answer_reaches_the_caller_waiting_for_it(channel: SessionChannel, opened: str) -> None:
    command = Command(id=new_ulid())
    threading.Timer(0.3, channel.send_answer, (opened, Answer(id=command.id, ran=2))).start()
    answer = channel.await_answer(opened, command.id, timeout_s=10)
    assert answer is not None and answer.ran == 2


def test_a_stale_answer_is_dropped_and_a_newer_callers_answer_kept(
    channel: SessionChannel, opened: str
) -> None:
    stale, mine, newer = new_ulid(), new_ulid(), new_ulid()
    for answer_id in (stale, newer):
        channel.send_answer(opened, Answer(id=answer_id))
    assert channel.await_answer(opened, mine, timeout_s=1) is None
    channel.send_answer(opened, Answer(id=mine))
    assert channel.await_answer(opened, mine, timeout_s=5) is not None
    kept = channel.await_answer(opened, newer, timeout_s=40)  # handed back for its caller
    assert kept is not None and kept.id == newer
    assert channel.await_answer(opened, stale, timeout_s=1) is None  # dropped for good


def test_a_closed_channel_is_gone_and_closing_again_is_fine(
    channel: SessionChannel, opened: str
) -> None:
    channel.close(opened)
    channel.close(opened)
    with pytest.raises(ChannelGone):
        channel.send_command(opened, Command(id=new_ulid()))
    with pytest.raises(ChannelGone):
        channel.next_command(opened, wait_s=0)


# --- on SQS as strict as AWS: a session's queues are unusable in their first second -------


@pytest.fixture
def strict_sqs(provisioned: Provisioned) -> Iterator[SqsSessionChannel]:
    with rules_in_force(StrictRules(queue_settle_s=1.0)):
        yield SqsSessionChannel.beside(
            RUNTIME.client("sqs"),
            prefix=session_queue_prefix("contract"),
            any_queue_url=next(iter(provisioned.queue_urls.values())),
        )


def test_a_session_is_usable_from_the_moment_it_opens(strict_sqs: SqsSessionChannel) -> None:
    """Issue 32 finding 1: a step sent, and a worker polling, in the queues' first second
    wait for them instead of reading "does not exist" as a session gone."""
    name = new_ulid()
    strict_sqs.open(name)
    command = Command(id=new_ulid(), op="close")
    strict_sqs.send_command(name, command)  # at once: SQS calls the queue missing still
    assert strict_sqs.next_command(name, wait_s=1) == command
    threading.Timer(0.1, strict_sqs.send_answer, (name, Answer(id=command.id))).start()
    assert strict_sqs.await_answer(name, command.id, timeout_s=10) is not None


def test_a_session_closed_as_it_opens_leaves_no_queue(strict_sqs: SqsSessionChannel) -> None:
    name = new_ulid()
    strict_sqs.open(name)
    strict_sqs.close(name)  # in the first second: the delete waits for the queues
    listed = RUNTIME.client("sqs").list_queues(QueueNamePrefix=session_queue_prefix("contract"))
    assert [u for u in listed.get("QueueUrls", []) if name in u] == []
    with pytest.raises(ChannelGone):
        strict_sqs.send_command(name, Command(id=new_ulid()))


def test_a_channel_is_settling_only_in_its_first_seconds() -> None:
    made = new_ulid()
    assert settling(made)
    assert not settling(made, now=time.time() + SETTLE_S + 1)


class FlakyDeletes:
    """An SQS client whose first DeleteMessage fails as a throttled call does."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def delete_message(self, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed += 1
            error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
            raise ClientError(error, "DeleteMessage")  # type: ignore[arg-type]
        return self._client.delete_message(**kwargs)


def test_a_taken_command_is_deleted_before_it_runs_even_when_a_delete_fails(
    provisioned: Provisioned,
) -> None:
    # Finding 2: the delete ran later on a thread and a failure was only logged, so the
    # command came back after the queue's 30 s default visibility and ran again.
    sqs = RUNTIME.client("sqs")
    flaky = FlakyDeletes(sqs)
    channel = SqsSessionChannel.beside(
        flaky,  # type: ignore[arg-type]
        prefix=session_queue_prefix("contract"),
        any_queue_url=next(iter(provisioned.queue_urls.values())),
    )
    name = new_ulid()
    channel.open(name)
    channel.send_command(name, Command(id=new_ulid()))
    assert channel.next_command(name, wait_s=1) is not None
    url = sqs.get_queue_url(QueueName=f"{session_queue_prefix('contract')}{name}-cmd")["QueueUrl"]
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert flaky.failed == 1
    assert counts == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }
    channel.close(name)
