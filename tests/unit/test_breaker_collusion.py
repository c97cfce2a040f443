"""The worker's breaker gate on the in-memory breakers: the reproduction of issue 23, where
tenants C and D each ran five jobs ``[goto B's site, goto a closed port]`` and the failures
were charged to B's site, whose shared breaker then held back B's own next job."""

from __future__ import annotations

import asyncio

from browser_task.egress.breakers import BreakerGate
from devstack.fakes.breakers import FakeBreakers
from pagefleet.jobs.record import JobError
from pagefleet.targets.breakers import SHARED, BreakerPolicy, BreakerState

B_SITE = "http://127.0.0.1:8081"
CLOSED_PORT = "http://127.0.0.1:9"
NOW = 2_000_000_000.0
REFUSED = JobError(
    kind="navigation_failed",
    message="navigation to http://127.0.0.1:9/x failed: net::ERR_CONNECTION_REFUSED",
    retryable=True,
    step_index=1,
)


def gate(breakers: FakeBreakers) -> BreakerGate:
    return BreakerGate(breakers, "worker-1", clock=lambda: NOW)


def test_a_failure_is_charged_to_the_origin_that_failed() -> None:
    breakers = FakeBreakers(BreakerPolicy())
    workers = gate(breakers)

    async def collude() -> None:
        for tenant in ("c", "d"):
            for _ in range(5):
                admitted = await workers.admit(B_SITE, tenant)  # on its first goto's origin
                assert admitted.allowed
                await workers.record(
                    B_SITE, tenant, REFUSED, probes=admitted.probes, failed_origin=CLOSED_PORT
                )
        await workers.flush()

    asyncio.run(collude())
    assert breakers.get(CLOSED_PORT).state is BreakerState.OPEN  # where the jobs failed
    assert breakers.get(B_SITE).state is BreakerState.CLOSED
    assert breakers.get(B_SITE, "c").failures == 0 and breakers.get(B_SITE, "c").total == 5
    b_job = asyncio.run(gate(breakers).admit(B_SITE, "b"))
    assert b_job.allowed and not b_job.probe  # no deferral for B


def test_colluders_failing_at_the_site_itself_do_not_defer_its_regular_tenant() -> None:
    breakers = FakeBreakers(BreakerPolicy())
    down = JobError(kind="target_unavailable", message="HTTP 503", retryable=True)

    async def run() -> None:
        workers = gate(breakers)
        await workers.record(B_SITE, "b", None, probes=frozenset())  # B's job succeeded
        for tenant in ("c", "d"):
            for _ in range(5):
                await workers.record(B_SITE, tenant, down, probes=frozenset())
        await workers.flush()

    asyncio.run(run())
    assert breakers.get(B_SITE).state is BreakerState.OPEN
    assert asyncio.run(gate(breakers).admit(B_SITE, "b")).allowed
    newcomer = asyncio.run(gate(breakers).admit(B_SITE, "e"))
    assert not newcomer.allowed and newcomer.scope == SHARED
