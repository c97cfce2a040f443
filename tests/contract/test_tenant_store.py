"""The tenant store's reads on a tenant that has everything a tenant gathers in the tenants
table (keys, limits, audit records, counters, a default webhook) and usage: the fake and the
DynamoDB adapter, one suite. Every item there that names the tenant must stay out of the
key listing (issue 23: an audit record broke ``keys_of``, and with it live tickets and
``pagefleet admin list-keys``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from devstack.fakes import FakeTenantStore
from devstack.fakes.notify import FakeNotifyDefaults
from devstack.fakes.tenancy import FakeAuditLog, FakeTenantCounters, FakeUsageStore
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.audit import DynamoAuditLog
from pagefleet.adapters.dynamodb.deliveries import DynamoNotifyDefaults
from pagefleet.adapters.dynamodb.tenant_counters import DynamoTenantCounters
from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.ports import TenantStore
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import (
    authenticate,
    create_api_key,
    hash_api_key,
    revoke_key,
    rotate_key,
)
from pagefleet.tenancy.audit import audit_record
from pagefleet.tenancy.usage import AttemptUsage

NOW_MS = 1_800_000_000_000
POLICY = TenantPolicy(max_running=3, submits_per_minute=120, allow_evaluate=True)


@dataclass
class Tenant:
    store: TenantStore
    keys: dict[str, str]  # key id -> plaintext


@pytest.fixture
def tenant(backend: str, request: pytest.FixtureRequest) -> Tenant:
    """Tenant ``t`` with two keys (one admin), limits, audit records, counters, a default
    webhook and usage; tenant ``other`` with a key and an audit record of its own."""
    if backend == "fake":
        store: TenantStore = FakeTenantStore()
        audit, counters = FakeAuditLog(), FakeTenantCounters()
        usage, notify = FakeUsageStore(), FakeNotifyDefaults()
    else:
        provisioned: Provisioned = request.getfixturevalue("provisioned")
        db, table = RUNTIME.client("dynamodb"), provisioned.tenants_table
        store = DynamoTenantStore(db, table)
        audit, counters = DynamoAuditLog(db, table), DynamoTenantCounters(db, table)
        usage, notify = (
            DynamoUsageStore(db, provisioned.usage_table),
            DynamoNotifyDefaults(db, table),
        )
    keys = {}
    for name, admin in (("ci", False), ("ops", True)):
        plaintext, record = create_api_key(store, "t", name=name, admin=admin)
        keys[record.key_id] = plaintext
    create_api_key(store, "other")
    store.put_policy("t", POLICY)
    for action, who in (("limits.changed", "t"), ("key.created", "t"), ("key.created", "other")):
        audit.write(audit_record("ops:k1", action, tenant_id=who, target="x"))  # type: ignore[arg-type]
    counters.spend("t", jobs=1, cost_ms=1000, tolerance_ms=5000, now_ms=NOW_MS)
    counters.add_queued("t", 1, limit=10)
    counters.take_slot("t", "j1", limit=3)
    notify.put("t", "https://hooks.example.com/pf")
    usage.record(
        AttemptUsage(
            tenant_id="t",
            job_id="j1",
            attempt=1,
            day="2026-12-01",
            first_attempt=True,
            browser_seconds=1.5,
        )
    )
    return Tenant(store, keys)


def test_keys_of_lists_the_tenants_keys_and_nothing_else(tenant: Tenant) -> None:
    listed = tenant.store.keys_of("t")
    assert sorted(r.key_id for _, r in listed) == sorted(tenant.keys)
    assert {r.name: r.admin for _, r in listed} == {"ci": False, "ops": True}
    assert {h for h, _ in listed} == {hash_api_key(k) for k in tenant.keys.values()}
    assert [r.tenant_id for _, r in tenant.store.keys_of("other")] == ["other"]
    assert tenant.store.keys_of("nobody") == []


def test_find_key_and_the_policy_read_through_the_other_items(tenant: Tenant) -> None:
    for key_id, plaintext in tenant.keys.items():
        found = authenticate(tenant.store, plaintext)
        assert (found.tenant_id, found.key_id) == ("t", key_id)
    assert tenant.store.find_key(hash_api_key("pf_nosuchkey")) is None
    assert tenant.store.get_policy("t") == POLICY
    assert tenant.store.get_policy("other") == TenantPolicy()


def test_revoke_and_rotate_find_the_key_among_the_other_items(tenant: Tenant) -> None:
    ci, ops = tenant.keys  # created in this order
    revoke_key(tenant.store, "t", ci)
    assert {r.key_id: r.revoked for _, r in tenant.store.keys_of("t")}[ci] is True
    new_plaintext, new = rotate_key(tenant.store, "t", ops)
    assert authenticate(tenant.store, new_plaintext).key_id == new.key_id
    listed = {r.key_id: r.revoked for _, r in tenant.store.keys_of("t")}
    assert listed == {ci: True, ops: True, new.key_id: False}
