"""The worker's breaker gate keeps the probes it holds alive while they run, and only those:
a probe whose worker died falls silent and is replaced after ``probe_timeout_s``."""

from __future__ import annotations

import asyncio

from browser_task.egress.breakers import BreakerGate
from devstack.fakes.breakers import FakeBreakers
from pagefleet.jobs.record import JobError
from pagefleet.targets.breakers import TENANT, BreakerPolicy, BreakerState

POLICY = BreakerPolicy(min_requests=2, failure_rate=0.5, cooldown_s=5, probe_timeout_s=10)
SITE = "http://site.test:80"


def test_a_running_probe_is_kept_alive_until_its_outcome_and_then_let_go() -> None:
    now = [1_000.0]
    breakers = FakeBreakers(POLICY)
    breakers.record_counts(SITE, tenant="t", total=2, failures=2, now=1_000)
    gate = BreakerGate(breakers, "w1", clock=lambda: now[0])
    other = BreakerGate(breakers, "w2", clock=lambda: now[0])

    async def scenario() -> None:
        now[0] = 1_006
        probe = await gate.admit(SITE, "t")
        assert probe.probes == {TENANT}
        # The probe job runs well past probe_timeout_s; each flush says it still does.
        for _ in range(5):
            now[0] += 5
            await gate.flush()
        assert breakers.get(SITE, "t").probe_started == 1_031
        assert not (await other.admit(SITE, "t")).allowed  # held, not replaced
        failed = JobError(kind="navigation_failed", message="503", retryable=True)
        await gate.record(SITE, "t", failed, probes=probe.probes)
        assert breakers.get(SITE, "t").state is BreakerState.OPEN
        # Its outcome written, the gate keeps nothing alive: the next probe is another's.
        now[0] += 6
        second = await other.admit(SITE, "t")
        assert second.probe
        await gate.flush()
        assert breakers.get(SITE, "t").probe_started == 1_037

    asyncio.run(scenario())
