"""SQS takes a message of XML's characters only (``devstack.sqs_contents``): the embedded AWS
refuses what SQS refuses, and a job whose options hold such a character is still queued
(its message is ASCII JSON: ``JobMessage.body``)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from devstack.sqs_contents import refused_character
from devstack.strict_aws import LENIENT, StrictRules, rules_in_force
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobMessage
from pagefleet.jobs.service import JobServices, submit_job
from tests.conftest import aws_client

SETTLED = {"queue_settle_s": 0}
# Characters SQS takes at the edges of its ranges, and some it refuses.
TAKEN = "\t\n\r \ud7ff\ue000\ufffd\U00010000\U0010ffff é 日本"
REFUSED = ["\x01", "\x1f", "\ufffe", "\uffff"]


@pytest.fixture
def sqs(provisioned: Provisioned) -> Any:
    return aws_client("sqs")


def test_only_xmls_characters_are_taken() -> None:
    assert refused_character(TAKEN) is None
    assert [refused_character(f"ok{c}ok") for c in REFUSED] == REFUSED
    assert refused_character("\ud800") == "\ud800"  # a lone surrogate


@pytest.mark.parametrize("character", REFUSED)
def test_a_message_with_a_character_sqs_refuses_is_not_sent(sqs: Any, character: str) -> None:
    with rules_in_force(StrictRules(**SETTLED)):
        url = sqs.create_queue(QueueName="contents")["QueueUrl"]
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=url, MessageBody=f"user agent {character}")
        assert refused.value.response["Error"]["Code"] == "InvalidMessageContents"
        sqs.send_message(QueueUrl=url, MessageBody=TAKEN)
    with rules_in_force(LENIENT):  # moto alone takes it
        sqs.send_message(QueueUrl=url, MessageBody=f"user agent {character}")


def test_a_batch_fails_such_an_entry_alone(sqs: Any) -> None:
    entries = [
        {"Id": "good", "MessageBody": TAKEN},
        {"Id": "bad", "MessageBody": "x\uffff"},
        {"Id": "also-good", "MessageBody": "y"},
    ]
    with rules_in_force(StrictRules(**SETTLED)):
        url = sqs.create_queue(QueueName="contents-batch")["QueueUrl"]
        answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert sorted(e["Id"] for e in answer["Successful"]) == ["also-good", "good"]
        [failed] = answer["Failed"]
        assert failed["Id"] == "bad" and failed["Code"] == "InvalidMessageContents"
        assert failed["SenderFault"] is True
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in got) == sorted([TAKEN, "y"])


def test_a_job_whose_options_hold_such_a_character_is_queued(svc: JobServices) -> None:
    request = JobRequest.model_validate(
        {
            "steps": [{"action": "goto", "url": "https://shop.test/"}],
            "options": {"user_agent": "pagefleet \uffff test", "locale": "de-DE"},
        }
    )
    with rules_in_force(StrictRules(**SETTLED)):
        job = submit_job(svc, "t", request).job
        [received] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=30)
    assert received.body.isascii()
    assert received.message is not None and received.message.job_id == job.job_id
    preview = received.message.preview
    assert preview is not None and preview.options is not None
    assert preview.options.user_agent == "pagefleet \uffff test"
    # The same message as pydantic writes JSON (the character as it is) would be refused.
    sqs = aws_client("sqs")
    with rules_in_force(StrictRules(**SETTLED)), pytest.raises(ClientError) as refused:
        sqs.send_message(
            QueueUrl=svc.queue.url("standard"),  # type: ignore[attr-defined]
            MessageBody=JobMessage.for_job(job, preview=True).model_dump_json(),
        )
    assert refused.value.response["Error"]["Code"] == "InvalidMessageContents"
