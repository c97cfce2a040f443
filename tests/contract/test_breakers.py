"""The circuit breakers' rules, on the in-memory fake and on the DynamoDB adapter (moto): one
suite. Who may open a site's shared breaker, and who it holds back (issue 23: two cheap
tenants could stall a third tenant's healthy site)."""

from __future__ import annotations

import pytest

from devstack.fakes.breakers import FakeBreakers
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.breakers import DomainBreakers
from pagefleet.runtime import RUNTIME
from pagefleet.targets.breakers import SHARED, TENANT, BreakerPolicy, Breakers, BreakerState

POLICY = BreakerPolicy(window_s=60, min_requests=4, failure_rate=0.5, cooldown_s=30)
SITE = "https://site.test:443"
T0 = 1_000


@pytest.fixture
def breakers(backend: str, request: pytest.FixtureRequest) -> Breakers:
    if backend == "fake":
        return FakeBreakers(POLICY)
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DomainBreakers(RUNTIME.client("dynamodb"), provisioned.jobs_table, POLICY)


def outcomes(breakers: Breakers, tenant: str, *, ok: int = 0, failed: int = 0, now: int = T0):
    return breakers.record_counts(SITE, tenant=tenant, total=ok + failed, failures=failed, now=now)


def test_one_tenants_failures_hold_back_that_tenant_only(breakers: Breakers) -> None:
    assert outcomes(breakers, "c", failed=4) is BreakerState.OPEN
    assert breakers.get(SITE, "c").state is BreakerState.OPEN
    assert breakers.get(SITE).state is BreakerState.CLOSED
    refused = breakers.admit(SITE, tenant="c", now=T0 + 10, worker="w")
    assert not refused.allowed and refused.scope == TENANT and refused.retry_after_s == 20
    assert breakers.admit(SITE, tenant="b", now=T0 + 10, worker="w").allowed


def test_colluding_tenants_do_not_hold_back_a_tenant_that_succeeds_there(
    breakers: Breakers,
) -> None:
    outcomes(breakers, "b", ok=3)  # b uses its site, which works
    outcomes(breakers, "c", failed=2)
    outcomes(breakers, "d", failed=2)  # two tenants: the shared breaker opens
    assert breakers.get(SITE).state is BreakerState.OPEN
    kept = breakers.admit(SITE, tenant="b", now=T0 + 5, worker="w")
    assert kept.allowed and not kept.probe
    newcomer = breakers.admit(SITE, tenant="e", now=T0 + 5, worker="w")
    assert not newcomer.allowed and newcomer.scope == SHARED
    # The tenant held back may now look the origin up (GET /v1/domains/{host}).
    assert [s.domain for s in breakers.on_host("site.test", "e")] == [SITE]


def test_a_site_that_really_fails_is_held_back_for_everyone(breakers: Breakers) -> None:
    outcomes(breakers, "b", ok=3)
    outcomes(breakers, "c", failed=2)
    outcomes(breakers, "d", failed=2)
    # The site is down for b too: its own breaker opens on its own failures...
    assert outcomes(breakers, "b", failed=4, now=T0 + 61) is BreakerState.OPEN
    held = breakers.admit(SITE, tenant="b", now=T0 + 62, worker="w")
    assert not held.allowed and held.scope == TENANT
    # ...and a tenant with no success there never got past the shared one.
    assert breakers.admit(SITE, tenant="e", now=T0 + 5, worker="w").scope == SHARED


def test_trust_lasts_trusted_for_s(breakers: Breakers) -> None:
    outcomes(breakers, "b", ok=1)
    outcomes(breakers, "c", failed=2, now=T0 + POLICY.trusted_for_s)
    outcomes(breakers, "d", failed=2, now=T0 + POLICY.trusted_for_s)
    assert breakers.admit(SITE, tenant="b", now=T0 + POLICY.trusted_for_s, worker="w").allowed
    late = breakers.admit(SITE, tenant="b", now=T0 + POLICY.trusted_for_s + 1, worker="w")
    assert not late.allowed and late.scope == SHARED


def test_a_tenant_held_back_by_its_own_breaker_never_takes_the_shared_probe(
    breakers: Breakers,
) -> None:
    outcomes(breakers, "c", failed=2)
    outcomes(breakers, "d", failed=2)  # shared open at T0
    outcomes(breakers, "c", failed=2, now=T0 + 20)  # c's own opens later, at T0 + 20
    cooling = breakers.admit(SITE, tenant="c", now=T0 + 31, worker="w1")
    assert not cooling.allowed and cooling.scope == TENANT
    assert breakers.get(SITE).state is BreakerState.OPEN  # its probe is still free...
    probe = breakers.admit(SITE, tenant="e", now=T0 + 31, worker="w2")
    assert probe.allowed and probe.probes == {SHARED}  # ...for a tenant that may run
    closed = breakers.record(
        SITE, tenant="e", ok=True, now=T0 + 32, probes=probe.probes, worker="w2"
    )
    assert closed is BreakerState.CLOSED


def test_a_tenants_successful_probe_restores_its_trust(breakers: Breakers) -> None:
    outcomes(breakers, "b", failed=4)  # b's own breaker opens (the site was down for it)
    probe = breakers.admit(SITE, tenant="b", now=T0 + 31, worker="w")
    assert probe.probes == {TENANT}
    breakers.record(SITE, tenant="b", ok=True, now=T0 + 32, probes=probe.probes, worker="w")
    outcomes(breakers, "c", failed=2, now=T0 + 40)
    outcomes(breakers, "d", failed=2, now=T0 + 40)
    assert breakers.get(SITE).state is BreakerState.OPEN
    assert breakers.admit(SITE, tenant="b", now=T0 + 41, worker="w").allowed


def test_a_probe_kept_alive_holds_the_breaker_and_a_silent_one_is_replaced(
    breakers: Breakers,
) -> None:
    # A probe's worker keeps it alive while the probe job runs; one whose worker died falls
    # silent and another job becomes the probe probe_timeout_s after it was last heard from
    # (it was held for the timeout from its start, 300 s, whatever became of its worker).
    outcomes(breakers, "b", failed=4)  # b's own breaker opens at T0
    timeout = POLICY.probe_timeout_s
    probe = breakers.admit(SITE, tenant="b", now=T0 + 31, worker="w1")
    assert probe.probes == {TENANT}
    alive_at = T0 + 31 + timeout - 1
    breakers.keep_probe(SITE, tenant="b", probes=probe.probes, now=alive_at, worker="w1")
    # Another worker's keep-alive does not hold a probe it does not own.
    breakers.keep_probe(SITE, tenant="b", probes=probe.probes, now=alive_at + 20, worker="w9")
    held = breakers.admit(SITE, tenant="b", now=alive_at + timeout - 1, worker="w2")
    assert not held.allowed and held.state is BreakerState.HALF_OPEN
    replaced = breakers.admit(SITE, tenant="b", now=alive_at + timeout, worker="w2")
    assert replaced.allowed and replaced.probes == {TENANT}
    # The first probe's worker, back, keeps nothing alive: the probe is w2's now.
    breakers.keep_probe(SITE, tenant="b", probes=probe.probes, now=alive_at + timeout, worker="w1")
    assert breakers.get(SITE, "b").probe_started == alive_at + timeout
