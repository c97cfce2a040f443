"""Notification stores: the fakes and the AWS adapters (DynamoDB, Secrets Manager,
EventBridge, SQS), one suite."""

from __future__ import annotations

import pytest

from devstack.fakes.notify import (
    FakeDeliveries,
    FakeEventBus,
    FakeNotifyDefaults,
    FakeSigningSecrets,
    FakeWebhookQueue,
)
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb import DynamoTenantStore
from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults
from pagefleet.adapters.notify import EventBridgeBus, SecretsManagerSigningSecrets, SqsWebhookQueue
from pagefleet.notify.ports import (
    BusEvent,
    Deliveries,
    DeliveryAttempt,
    EventBus,
    Mark,
    NotifyDefaults,
    SigningSecrets,
    WebhookQueue,
)
from pagefleet.notify.signing import SECRET_PREFIX
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.conftest import aws_client

LATER = 1_900_000_000


@pytest.fixture
def deliveries(backend: str, request: pytest.FixtureRequest) -> Deliveries:
    if backend == "fake":
        return FakeDeliveries()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoDeliveries(RUNTIME.client("dynamodb"), provisioned.jobs_table)


@pytest.fixture
def bus(backend: str, request: pytest.FixtureRequest) -> EventBus:
    if backend == "fake":
        return FakeEventBus()
    request.getfixturevalue("provisioned")  # a fresh moto
    return EventBridgeBus(aws_client("events"))


@pytest.fixture
def webhooks(backend: str, request: pytest.FixtureRequest) -> WebhookQueue:
    if backend == "fake":
        return FakeWebhookQueue()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return SqsWebhookQueue(aws_client("sqs"), provisioned.webhook_queue_url)


@pytest.fixture
def defaults(backend: str, request: pytest.FixtureRequest) -> NotifyDefaults:
    if backend == "fake":
        return FakeNotifyDefaults()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoNotifyDefaults(RUNTIME.client("dynamodb"), provisioned.tenants_table)


@pytest.fixture
def signing(backend: str, request: pytest.FixtureRequest) -> SigningSecrets:
    if backend == "fake":
        return FakeSigningSecrets()
    request.getfixturevalue("provisioned")  # a fresh moto
    return SecretsManagerSigningSecrets(RUNTIME.client("secretsmanager"), "test")


def _attempt(n: int, at: str, status: str = "failed") -> DeliveryAttempt:
    return DeliveryAttempt(
        delivery_id="dlv_1", attempt=n, at=at, url="http://127.0.0.1:9/hook", status=status
    )


def test_attempts_are_listed_oldest_first(deliveries: Deliveries) -> None:
    deliveries.record("t", "j1", _attempt(2, "2027-01-15T08:00:05.000Z"), expires_at=LATER)
    deliveries.record("t", "j1", _attempt(1, "2027-01-15T08:00:00.000Z"), expires_at=LATER)
    deliveries.record(
        "t", "j1", _attempt(3, "2027-01-15T08:00:30.000Z", "delivered"), expires_at=LATER
    )
    deliveries.record("t", "j2", _attempt(1, "2027-01-15T08:00:00.000Z"), expires_at=LATER)
    listed = deliveries.attempts("t", "j1")
    assert [a.attempt for a in listed] == [1, 2, 3]
    assert listed[-1].status == "delivered"
    assert deliveries.attempts("other", "j1") == []


def test_marks(deliveries: Deliveries) -> None:
    # More than one read (100 keys) and one write (25 items) of DynamoDB take.
    marks = [Mark("t", f"j{n}", f"webhook#dlv_{n}", LATER) for n in range(130)]
    assert deliveries.marked_many(marks) == set()
    deliveries.mark_many(marks[::2])
    assert deliveries.marked_many(marks) == set(marks[::2])
    assert deliveries.marked_many([Mark("t", "j0", "event#dlv_0")]) == set()
    assert deliveries.marked_many([Mark("other", "j0", "webhook#dlv_0")]) == set()
    deliveries.mark_many(marks[:3])  # marked again: still marked, once
    assert deliveries.marked_many(marks[:4]) == {marks[0], marks[2], marks[1]}


def test_marks_are_read_and_written_in_batches_of_dynamodbs_size(provisioned: Provisioned) -> None:
    db = aws_client("dynamodb")
    calls: list[str] = []
    db.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    deliveries = DynamoDeliveries(db, provisioned.jobs_table)
    marks = [Mark("t", f"j{n}", "event#dlv", LATER) for n in range(201)]
    deliveries.mark_many(marks)
    assert deliveries.marked_many(marks) == set(marks)
    assert calls == ["BatchWriteItem"] * 9 + ["BatchGetItem"] * 3


def test_events_are_put_in_order_and_a_refused_one_is_told(bus: EventBus) -> None:
    # 23: three PutEvents; an entry without a detail type is refused alone.
    events = [BusEvent("pagefleet", "Job Finished", {"job_id": f"j{n}"}) for n in range(23)]
    events[12] = BusEvent("pagefleet", "", {"job_id": "j12"})
    told = bus.put_many(events)
    assert [n for n, t in enumerate(told) if t is not None] == [12]
    assert told[12] is not None and "InvalidArgument" in told[12]
    assert bus.put_many([]) == []


def test_webhooks_are_sent_in_batches_within_sqss_limits(webhooks: WebhookQueue) -> None:
    # 12 messages of 30 KB: more than ten a batch, and more than 256 KiB for ten.
    messages = [{"job_id": f"j{n}", "body": "x" * 30_000} for n in range(12)]
    assert webhooks.send_many(messages) == [None] * 12


def test_a_tenants_default_webhook(defaults: NotifyDefaults) -> None:
    assert defaults.get("t") is None
    defaults.put("t", "https://hooks.example.com/pf")
    assert defaults.get("t") == "https://hooks.example.com/pf"
    assert defaults.get("other") is None
    defaults.put("t", None)
    assert defaults.get("t") is None


def test_the_default_does_not_disturb_the_key_listing(provisioned: Provisioned) -> None:
    tenants = DynamoTenantStore(RUNTIME.client("dynamodb"), provisioned.tenants_table)
    _, record = create_api_key(tenants, "t")
    DynamoNotifyDefaults(RUNTIME.client("dynamodb"), provisioned.tenants_table).put(
        "t", "https://hooks.example.com/pf"
    )
    assert [r.key_id for _, r in tenants.keys_of("t")] == [record.key_id]


def test_signing_secrets_are_made_once_and_rotated(signing: SigningSecrets) -> None:
    first = signing.get("t")
    assert first.startswith(SECRET_PREFIX) and len(first) > 30
    assert signing.get("t") == first
    assert signing.get("other") != first
    rotated = signing.rotate("t")
    assert rotated != first and signing.get("t") == rotated
