"""The webhook sender: signed POSTs to receivers on 127.0.0.1, retries, and the egress policy
at send time (refused URLs are never connected to: no traffic leaves the machine)."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from devstack.fakes.notify import FakeDeliveries, FakeSigningSecrets
from devstack.pollers import sqs_event_records
from devstack.provision import Provisioned
from functions.webhooks import handler as webhooks_handler
from pagefleet.adapters.notify import SecretsManagerSigningSecrets
from pagefleet.backoff import Backoff, Jitter
from pagefleet.notify import signing
from pagefleet.notify.sender import WebhookMessage, WebhookSender
from pagefleet.runtime import RUNTIME
from pagefleet.targets.egress_policy import EgressPolicy
from tests.support.receiver import Receiver, webhook_receiver

BODY = json.dumps({"event": "job.finished", "job_id": "j1", "status": "succeeded"})


def message(url: str) -> WebhookMessage:
    return WebhookMessage(
        tenant_id="t",
        job_id="j1",
        delivery_id="dlv_abc",
        url=url,
        job_status="succeeded",
        expires_at=2_000_000_000,
        body=BODY,
    )


def no_lookups(host: str) -> list[str]:
    raise AssertionError(f"{host} must not be looked up")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as r:
        yield r


def sender(
    *, allow_loopback: bool = True, resolve: Any = no_lookups, max_attempts: int = 12
) -> tuple[WebhookSender, FakeSigningSecrets, FakeDeliveries]:
    secrets, deliveries = FakeSigningSecrets(), FakeDeliveries()
    return (
        WebhookSender(
            secrets,
            deliveries,
            policy=EgressPolicy(allow_loopback=allow_loopback),
            resolve=resolve,
            http=httpx.Client(trust_env=False),
            max_attempts=max_attempts,
            backoff=Backoff(10, 3600, Jitter.EQUAL),
        ),
        secrets,
        deliveries,
    )


def test_a_delivery_is_a_signed_post(receiver: Receiver) -> None:
    send, secrets, deliveries = sender()
    result = send.send(message(receiver.url), attempt=1)
    assert result.retry_in_s is None and result.attempt.status == "delivered"
    (request,) = receiver.requests
    assert request.path == "/hooks/pagefleet" and request.body == BODY.encode()
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Pagefleet-Delivery"] == "dlv_abc"
    assert request.headers["Pagefleet-Event"] == "job.finished"
    assert request.headers["Pagefleet-Attempt"] == "1"
    header = request.headers["Pagefleet-Signature"]
    assert signing.verify(secrets.get("t"), header, request.body, now=time.time())
    (recorded,) = deliveries.attempts("t", "j1")
    assert (recorded.status, recorded.status_code, recorded.attempt) == ("delivered", 204, 1)


def test_a_job_in_review_is_posted_as_job_needs_review(receiver: Receiver) -> None:
    send, _, _ = sender()
    fields = {"job_status": "needs_review", "delivery_id": "dlv_r", "event": "job.needs_review"}
    review = dataclasses.replace(message(receiver.url), **fields)
    assert send.send(review, attempt=1).attempt.status == "delivered"
    (request,) = receiver.requests
    assert request.headers["Pagefleet-Event"] == "job.needs_review"


def test_a_failing_receiver_is_retried_with_backoff(receiver: Receiver) -> None:
    receiver.answers = [500, 503]
    send, _, deliveries = sender(max_attempts=3)
    first = send.send(message(receiver.url), attempt=1)
    second = send.send(message(receiver.url), attempt=2)
    third = send.send(message(receiver.url), attempt=3)
    assert first.attempt.status == "failed" and 5 <= (first.retry_in_s or 0) <= 10
    assert second.attempt.status == "failed" and 10 <= (second.retry_in_s or 0) <= 20
    assert third.attempt.status == "delivered" and third.retry_in_s is None
    assert [(a.attempt, a.status_code) for a in deliveries.attempts("t", "j1")] == [
        (1, 500),
        (2, 503),
        (3, 204),
    ]
    assert [r.headers["Pagefleet-Attempt"] for r in receiver.requests] == ["1", "2", "3"]


def test_the_last_attempt_gives_up(receiver: Receiver) -> None:
    receiver.then = 500
    send, _, _ = sender(max_attempts=2)
    result = send.send(message(receiver.url), attempt=2)
    assert result.retry_in_s is None and result.attempt.status == "failed"
    assert "giving up after 2 attempts" in (result.attempt.error or "")


def test_redirects_are_not_followed(receiver: Receiver) -> None:
    receiver.then = 302
    receiver.extra_headers = {"Location": "http://169.254.169.254/latest/meta-data/"}
    send, _, _ = sender()
    result = send.send(message(receiver.url), attempt=1)
    assert result.attempt.status == "failed" and "redirects are not followed" in (
        result.attempt.error or ""
    )
    assert len(receiver.requests) == 1


def test_loopback_is_refused_outside_local_mode(receiver: Receiver) -> None:
    send, _, deliveries = sender(allow_loopback=False)
    result = send.send(message(receiver.url), attempt=1)
    assert result.attempt.status == "refused" and result.retry_in_s is None
    assert "loopback" in (result.attempt.error or "")
    assert receiver.requests == []
    assert deliveries.attempts("t", "j1")[0].status == "refused"


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://metadata.google.internal/",
        "http://0x0a000001/",  # 10.0.0.1 spelled in hex
    ],
)
def test_private_and_metadata_targets_are_refused_without_connecting(url: str) -> None:
    send, _, _ = sender()
    result = send.send(message(url), attempt=1)
    assert result.attempt.status == "refused" and result.retry_in_s is None


def test_a_name_is_checked_after_resolution_and_the_checked_address_is_used(
    receiver: Receiver,
) -> None:
    port = int(receiver.url.split(":")[2].split("/")[0])
    looked_up: list[str] = []

    def resolve(host: str) -> list[str]:
        looked_up.append(host)
        return {"hooks.test": ["127.0.0.1"], "rebind.test": ["127.0.0.1", "10.0.0.9"]}[host]

    send, _, _ = sender(resolve=resolve)
    ok = send.send(message(f"http://hooks.test:{port}/hooks/pagefleet"), attempt=1)
    assert ok.attempt.status == "delivered"
    assert receiver.requests[0].headers["Host"] == f"hooks.test:{port}"
    refused = send.send(message(f"http://rebind.test:{port}/x"), attempt=1)
    assert refused.attempt.status == "refused" and "10.0.0.9" in (refused.attempt.error or "")
    assert len(receiver.requests) == 1 and looked_up == ["hooks.test", "rebind.test"]


def test_an_unresolvable_host_is_retried(receiver: Receiver) -> None:
    def resolve(host: str) -> list[str]:
        raise OSError(-3, "Temporary failure in name resolution")

    send, _, _ = sender(resolve=resolve)
    result = send.send(message("https://hooks.example.com/pf"), attempt=1)
    assert result.attempt.status == "failed" and result.retry_in_s is not None


# --- the Lambda handler, on the SQS event source ----------------------------------------------
@pytest.fixture
def webhook_env(provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Provisioned:
    monkeypatch.setenv("PAGEFLEET_JOBS_TABLE", provisioned.jobs_table)
    monkeypatch.setenv("PAGEFLEET_QUEUE_URL", provisioned.webhook_queue_url)
    monkeypatch.setenv("PAGEFLEET_ALLOW_LOOPBACK", "true")
    RUNTIME.reset()
    return provisioned


def _received(env: Provisioned) -> tuple[list[dict[str, Any]], str]:
    sqs = RUNTIME.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=env.webhook_queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    got = sqs.receive_message(
        QueueUrl=env.webhook_queue_url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=30,
        WaitTimeSeconds=0,
        MessageSystemAttributeNames=["All"],
    )
    return got.get("Messages", []), arn


def test_the_handler_deletes_deliveries_and_hides_failures_for_their_backoff(
    webhook_env: Provisioned, receiver: Receiver
) -> None:
    sqs = RUNTIME.client("sqs")
    receiver.answers = [204, 500]
    for job_id in ("good", "bad"):
        body = {**message(receiver.url).__dict__, "job_id": job_id}
        sqs.send_message(QueueUrl=webhook_env.webhook_queue_url, MessageBody=json.dumps(body))
    messages, arn = _received(webhook_env)
    assert len(messages) == 2
    answer = webhooks_handler.handler(sqs_event_records(messages, arn), None)
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    bad = next(m for m in messages if json.loads(m["Body"])["job_id"] == "bad")
    assert failed == {bad["MessageId"]}
    # The failure is hidden for its backoff (at least 5 s), not offered again at once.
    assert _received(webhook_env)[0] == []
    secret = SecretsManagerSigningSecrets(RUNTIME.client("secretsmanager"), "dev").get("t")
    for request in receiver.requests:
        assert signing.verify(
            secret, request.headers["Pagefleet-Signature"], request.body, now=time.time()
        )


def test_the_handler_logs_what_a_failed_attempt_got_and_never_the_url(
    webhook_env: Provisioned, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.answers = [503]
    body = {**message(f"{receiver.url}?token=s3cret").__dict__, "job_id": "logged"}
    RUNTIME.client("sqs").send_message(
        QueueUrl=webhook_env.webhook_queue_url, MessageBody=json.dumps(body)
    )
    messages, arn = _received(webhook_env)
    logged = io.StringIO()  # the function's log (CloudWatch Logs on AWS)
    monkeypatch.setattr(webhooks_handler.logger.registered_handler, "stream", logged)
    with pytest.raises(BatchProcessingError):  # a batch of one failed: SQS offers it again
        webhooks_handler.handler(sqs_event_records(messages, arn), None)
    out = logged.getvalue()
    (line,) = [json.loads(x) for x in out.splitlines() if '"webhook attempt"' in x]
    assert (line["job_id"], line["outcome"], line["status_code"]) == ("logged", "failed", 503)
    assert line["error"] == "the receiver answered 503"
    assert "s3cret" not in out
