"""The worker's side of the per-origin circuit breakers (``pagefleet.targets.breakers``).

Admissions of closed origins are cached for a moment per tenant and outcomes are added up
per origin and tenant and written every few seconds (failures at the rate that opens a
breaker within a quarter of a second), so the breakers cost a few DynamoDB calls a second
per worker, not several per job. Probe outcomes are written at once: they decide
the breaker's state. Only failures that say the site is failing count; a host that does not
resolve is the job's own mistake and counts for nothing. A failure is charged to the origin
that failed: a job admitted on its first goto's origin that then fails elsewhere counts as
a success of the first (it answered) and a failure of the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Callable

from browser_task.observe.telemetry import logger
from pagefleet.jobs.record import JobError
from pagefleet.targets.breakers import Admission, Breakers, BreakerState

# Failures that say the *site* is failing (not the workflow): only these count.
TARGET_FAILURE_KINDS = frozenset({"navigation_failed", "target_unavailable"})

ADMISSION_CACHE_S = 2.0
# A probe this worker holds is kept alive with each flush for at most this long (a probe job
# runs for its job_timeout_s at most); past it, one lost in a bug goes silent and is replaced.
PROBE_KEPT_MAX_S = 3600.0
# Outcomes are added up and written this often: each flush is a read and a write of the
# domain's breaker item, which at one flush a second cost ~0.7 DynamoDB calls per job.
FLUSH_INTERVAL_S = 3.0
# Failures at the rate that opens a breaker are written this soon instead (those of the same
# moment share the write): until the breaker hears of them, every job at the failing site
# spends an attempt there, and with the 3 s flush a job retried after 1 s failed two or three
# times before the breaker opened. A site failing below that rate waits for the flush.
FAILURE_FLUSH_S = 0.25


def counts_against_target(error: JobError | None) -> bool | None:
    """True: a target failure; False: a success; None: says nothing about the site."""
    if error is None:
        return False
    if error.retryable and error.kind in TARGET_FAILURE_KINDS:
        return True
    return None


class BreakerGate:
    def __init__(
        self,
        breakers: Breakers,
        worker_id: str,
        *,
        clock: Callable[[], float] = time.time,
        flush_every_s: float = FLUSH_INTERVAL_S,
        failures_within_s: float = FAILURE_FLUSH_S,
    ) -> None:
        self._breakers = breakers
        self._worker = worker_id
        self._clock = clock
        self._flush_every_s = flush_every_s
        self._failures_within_s = failures_within_s
        self._failing = asyncio.Event()  # counts wait that could open a breaker
        # (origin, tenant) -> until when its breakers are known closed / counts to write
        self._closed_until: dict[tuple[str, str], float] = {}
        self._pending: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        # (origin, tenant) -> the probes this worker holds there and since when (monotonic)
        self._held: dict[tuple[str, str], tuple[frozenset[str], float]] = {}

    async def admit(self, origin: str, tenant: str) -> Admission:
        key = (origin, tenant)
        if self._closed_until.get(key, 0.0) > time.monotonic():
            return Admission(allowed=True)
        admission = await asyncio.to_thread(
            self._breakers.admit, origin, tenant=tenant, now=int(self._clock()), worker=self._worker
        )
        if admission.allowed and not admission.probe:
            self._closed_until[key] = time.monotonic() + ADMISSION_CACHE_S
        if admission.probe:
            self._held[key] = (admission.probes, time.monotonic())
        return admission

    async def record(
        self,
        origin: str,
        tenant: str,
        error: JobError | None,
        *,
        probes: frozenset[str],
        failed_origin: str | None = None,
    ) -> None:
        """The outcome of a job admitted on ``origin``; ``failed_origin``: where its
        navigation failure happened, when that is known and another origin."""
        failed = counts_against_target(error)
        if failed and failed_origin is not None and failed_origin != origin:
            self._count(failed_origin, tenant, failed=True)
            failed = False  # the job's own origin answered: a success there
        if probes:
            self._held.pop((origin, tenant), None)
            # A probe that says nothing about the site (e.g. a workflow error) still ends the
            # half-open period: count it as the site having answered.
            await asyncio.to_thread(
                self._breakers.record,
                origin,
                tenant=tenant,
                ok=not failed,
                now=int(self._clock()),
                probes=probes,
                worker=self._worker,
            )
            self._closed_until.pop((origin, tenant), None)
            return
        if failed is not None:
            self._count(origin, tenant, failed=failed)

    def _count(self, origin: str, tenant: str, *, failed: bool) -> None:
        counts = self._pending[(origin, tenant)]
        counts[0] += 1
        counts[1] += int(failed)
        if self._at_opening_rate(total=counts[0], failures=counts[1]):
            self._failing.set()

    def _at_opening_rate(self, *, total: int, failures: int) -> bool:
        """Failing at the rate that opens a breaker (over the counts not written yet)."""
        return failures > 0 and failures >= total * self._breakers.policy.failure_rate

    async def flush(self) -> None:
        await self._keep_probes()
        pending, self._pending = self._pending, defaultdict(lambda: [0, 0])
        for (origin, tenant), (total, failures) in pending.items():
            try:
                state = await asyncio.to_thread(
                    self._breakers.record_counts,
                    origin,
                    tenant=tenant,
                    total=total,
                    failures=failures,
                    now=int(self._clock()),
                )
            except Exception as exc:
                logger.warning(
                    "breaker update failed", extra={"origin": origin, "error": str(exc)[:200]}
                )
                continue
            if state is not BreakerState.CLOSED or self._at_opening_rate(
                total=total, failures=failures
            ):
                # Open, or failing here at the opening rate (another worker's counts may open
                # it next): the next job asks the breaker instead of this worker's cache.
                self._closed_until.pop((origin, tenant), None)
            if state is not BreakerState.CLOSED:
                logger.warning("circuit open", extra={"origin": origin, "tenant_id": tenant})

    async def _keep_probes(self) -> None:
        """Tell the breakers the probes this worker holds still run: a probe whose worker died
        goes silent and is replaced after ``probe_timeout_s``, not held for minutes."""
        now = time.monotonic()
        for key, (probes, since) in list(self._held.items()):
            if now - since > PROBE_KEPT_MAX_S:
                self._held.pop(key, None)
                continue
            origin, tenant = key
            try:
                await asyncio.to_thread(
                    self._breakers.keep_probe,
                    origin,
                    tenant=tenant,
                    probes=probes,
                    now=int(self._clock()),
                    worker=self._worker,
                )
            except Exception as exc:
                logger.warning(
                    "probe keep-alive failed", extra={"origin": origin, "error": str(exc)[:200]}
                )

    async def run_flusher(self) -> None:
        """Write the counts every ``flush_every_s``, and within ``failures_within_s`` of
        failures at the rate that opens a breaker."""
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._failing.wait(), self._flush_every_s)
                if self._failing.is_set():
                    await asyncio.sleep(self._failures_within_s)
                    self._failing.clear()
                await self.flush()
