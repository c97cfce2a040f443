"""Injected AWS faults look like AWS's own: botocore retries them; effects may repeat."""

from __future__ import annotations

import random

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pagefleet.adapters.faults import FaultInjector


@pytest.fixture
def aws(moto_endpoint: str) -> None:
    """A real moto server: with mock_aws, moto's in-process stub would apply the call too."""


def _client(service: str, attempts: int) -> object:
    return boto3.client(
        service, config=Config(retries={"mode": "standard", "max_attempts": attempts})
    )


def test_rejected_calls_are_retried_by_botocore(aws: None) -> None:
    sqs = _client("sqs", 10)
    url = sqs.create_queue(QueueName="faults-rejected")["QueueUrl"]
    injector = FaultInjector(rate=0.3, lost_reply_share=0.0, rng=random.Random(7))
    injector.attach(sqs)
    for n in range(10):
        sqs.send_message(QueueUrl=url, MessageBody=str(n))
    assert injector.injected > 0
    got = int(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
    )
    assert got == 10  # every send eventually went through, once


def test_without_retries_the_caller_sees_an_aws_error(aws: None) -> None:
    s3 = _client("s3", 1)
    s3.create_bucket(Bucket="bucket-x")
    FaultInjector(rate=1.0, lost_reply_share=0.0).attach(s3)
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket="bucket-x", Key="k", Body=b"x")
    assert info.value.response["Error"]["Code"] in {"SlowDown", "ServiceUnavailable"}


def test_lost_replies_repeat_an_applied_call(aws: None) -> None:
    sqs = _client("sqs", 5)
    url = sqs.create_queue(QueueName="faults-lost")["QueueUrl"]
    FaultInjector(rate=1.0, lost_reply_share=1.0).attach(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="once?")
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # get_queue_attributes ran twice too, harmlessly; the send was applied twice.
    assert int(attrs["ApproximateNumberOfMessages"]) == 2
