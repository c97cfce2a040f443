"""The per-domain circuit breaker, shared through DynamoDB (moto server)."""

from __future__ import annotations

import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.breakers import DomainBreakers
from pagefleet.breaker import BreakerPolicy, BreakerState, domain_of
from pagefleet.runtime import RUNTIME

POLICY = BreakerPolicy(window_s=60, min_requests=4, failure_rate=0.5, cooldown_s=30)


@pytest.fixture
def breakers(provisioned: Provisioned) -> DomainBreakers:
    return DomainBreakers(RUNTIME.client("dynamodb"), provisioned.jobs_table, POLICY)


def test_domain_of() -> None:
    assert domain_of("https://Shop.Example.com:8443/a?b") == "shop.example.com"
    assert domain_of("not a url") is None


def test_closed_until_the_failure_rate_is_reached(breakers: DomainBreakers) -> None:
    t = 1_000
    assert breakers.admit("site.test", now=t, worker="w1").allowed
    for ok in (True, False, False):
        assert breakers.record("site.test", ok=ok, now=t) is BreakerState.CLOSED
    # 4th outcome: 3 failures of 4 >= 50% with min_requests met.
    assert breakers.record("site.test", ok=False, now=t) is BreakerState.OPEN
    admission = breakers.admit("site.test", now=t + 10, worker="w1")
    assert not admission.allowed
    assert admission.retry_after_s == 20


def test_few_requests_never_open_it(breakers: DomainBreakers) -> None:
    for _ in range(3):
        breakers.record("quiet.test", ok=False, now=1_000)
    assert breakers.get("quiet.test").state is BreakerState.CLOSED


def test_window_resets_old_counts(breakers: DomainBreakers) -> None:
    for _ in range(3):
        breakers.record("slow.test", ok=False, now=1_000)
    # A minute later the old failures no longer count.
    assert breakers.record("slow.test", ok=False, now=1_100) is BreakerState.CLOSED
    assert breakers.get("slow.test").total == 1


def _open(breakers: DomainBreakers, domain: str, t: int) -> None:
    for _ in range(4):
        breakers.record(domain, ok=False, now=t)
    assert breakers.get(domain).state is BreakerState.OPEN


def test_after_cooldown_exactly_one_probe_runs(breakers: DomainBreakers) -> None:
    _open(breakers, "flaky.test", 1_000)
    first = breakers.admit("flaky.test", now=1_031, worker="w1")
    second = breakers.admit("flaky.test", now=1_031, worker="w2")
    assert first.allowed and first.probe
    assert not second.allowed
    assert breakers.get("flaky.test").state is BreakerState.HALF_OPEN


def test_successful_probe_closes_failed_probe_reopens(breakers: DomainBreakers) -> None:
    _open(breakers, "a.test", 1_000)
    breakers.admit("a.test", now=1_031, worker="w1")
    assert (
        breakers.record("a.test", ok=True, now=1_032, probe=True, worker="w1")
        is BreakerState.CLOSED
    )
    assert breakers.admit("a.test", now=1_033, worker="w2").allowed

    _open(breakers, "b.test", 1_000)
    breakers.admit("b.test", now=1_031, worker="w1")
    assert (
        breakers.record("b.test", ok=False, now=1_032, probe=True, worker="w1") is BreakerState.OPEN
    )
    assert not breakers.admit("b.test", now=1_040, worker="w2").allowed  # a new cooldown


def test_a_silent_probe_is_replaced(breakers: DomainBreakers) -> None:
    _open(breakers, "gone.test", 1_000)
    assert breakers.admit("gone.test", now=1_031, worker="dead").probe
    assert not breakers.admit("gone.test", now=1_100, worker="w2").allowed
    late = breakers.admit("gone.test", now=1_031 + POLICY.probe_timeout_s, worker="w2")
    assert late.allowed and late.probe


def test_breakers_are_listed(breakers: DomainBreakers) -> None:
    _open(breakers, "x.test", 1_000)
    breakers.record("y.test", ok=True, now=1_000)
    states = {d.domain: d.state for d in breakers.list()}
    assert states == {"x.test": BreakerState.OPEN, "y.test": BreakerState.CLOSED}


def test_domains_are_visible_in_the_api(api_env: Provisioned) -> None:
    from functions.api import app as api_app
    from pagefleet.runtime import RUNTIME
    from pagefleet.tenants import create_api_key
    from tests.support.api import ApiCaller

    tenant = ApiCaller(create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "acme")[0])
    admin = ApiCaller(
        create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "ops", admin=True)[0]
    )
    for _ in range(5):
        api_app.breakers().record("down.test", ok=False, now=2_000_000_000)
    listed = admin.call("GET", "/v1/domains")
    assert listed.status == 200
    assert [(d["domain"], d["state"]) for d in listed.body["domains"]] == [("down.test", "open")]
    assert tenant.call("GET", "/v1/domains").status == 403
    one = tenant.call("GET", "/v1/domains/DOWN.test")
    assert one.status == 200
    assert one.body["state"] == "open"
    assert tenant.call("GET", "/v1/domains/unknown.test").body["state"] == "closed"
