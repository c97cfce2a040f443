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


FAILED = JobError(kind="navigation_failed", message="503", retryable=True)


def test_failures_that_could_open_a_breaker_are_written_at_once_not_with_the_flush() -> None:
    """A site that went down: until the breaker hears of it, every job there spends an
    attempt on it. Its failures are written within ``failures_within_s``, not at the next
    periodic flush (here an hour away)."""
    breakers = FakeBreakers(POLICY)
    gate = BreakerGate(breakers, "w1", flush_every_s=3600, failures_within_s=0)

    async def scenario() -> None:
        flusher = asyncio.create_task(gate.run_flusher())
        try:
            await gate.record(SITE, "t", FAILED, probes=frozenset())
            await gate.record(SITE, "t", FAILED, probes=frozenset())
            for _ in range(200):  # a few loop turns; the periodic flush is an hour away
                if breakers.get(SITE, "t").state is BreakerState.OPEN:
                    break
                await asyncio.sleep(0.01)
            assert breakers.get(SITE, "t").state is BreakerState.OPEN
        finally:
            flusher.cancel()

    asyncio.run(scenario())


def test_a_site_failing_below_the_opening_rate_waits_for_the_flush() -> None:
    breakers = FakeBreakers(POLICY)
    gate = BreakerGate(breakers, "w1", flush_every_s=3600, failures_within_s=0)

    async def scenario() -> None:
        flusher = asyncio.create_task(gate.run_flusher())
        try:
            for _ in range(3):
                await gate.record(SITE, "t", None, probes=frozenset())
            await gate.record(SITE, "t", FAILED, probes=frozenset())
            await asyncio.sleep(0.2)
            assert breakers.get(SITE, "t").total == 0  # nothing written yet
            await gate.flush()
            assert breakers.get(SITE, "t").total == 4
        finally:
            flusher.cancel()

    asyncio.run(scenario())


def test_a_worker_whose_jobs_fail_there_asks_again_before_its_next_job_there() -> None:
    """Two workers' failures open a breaker: the one whose own write left it closed does not
    let its next job through on the admission it had cached before."""
    breakers = FakeBreakers(POLICY)
    first, second = BreakerGate(breakers, "w1"), BreakerGate(breakers, "w2")

    async def scenario() -> None:
        assert (await first.admit(SITE, "t")).allowed  # cached as closed for a moment
        assert (await second.admit(SITE, "t")).allowed
        await first.record(SITE, "t", FAILED, probes=frozenset())
        await first.flush()  # one request of the two the breaker needs: still closed
        assert breakers.get(SITE, "t").state is BreakerState.CLOSED
        await second.record(SITE, "t", FAILED, probes=frozenset())
        await second.flush()  # opens it
        assert breakers.get(SITE, "t").state is BreakerState.OPEN
        assert not (await first.admit(SITE, "t")).allowed

    asyncio.run(scenario())
