"""Notification stores: the fakes and the AWS adapters (DynamoDB, Secrets Manager), one suite."""

from __future__ import annotations

import pytest

from devstack.fakes.notify import FakeDeliveries, FakeNotifyDefaults, FakeSigningSecrets
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb import DynamoTenantStore
from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults
from pagefleet.adapters.notify import SecretsManagerSigningSecrets
from pagefleet.notify.ports import Deliveries, DeliveryAttempt, NotifyDefaults, SigningSecrets
from pagefleet.notify.signing import SECRET_PREFIX
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key

LATER = 1_900_000_000


@pytest.fixture
def deliveries(backend: str, request: pytest.FixtureRequest) -> Deliveries:
    if backend == "fake":
        return FakeDeliveries()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoDeliveries(RUNTIME.client("dynamodb"), provisioned.jobs_table)


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
    assert not deliveries.marked("t", "j1", "webhook#dlv_1")
    deliveries.mark("t", "j1", "webhook#dlv_1", expires_at=LATER)
    assert deliveries.marked("t", "j1", "webhook#dlv_1")
    assert not deliveries.marked("t", "j1", "event#dlv_1")
    assert not deliveries.marked("other", "j1", "webhook#dlv_1")


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
