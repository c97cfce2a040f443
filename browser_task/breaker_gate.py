"""The worker's side of the per-domain circuit breaker.

Admissions of closed domains are cached for a moment and outcomes are added up per domain
and written once a second, so the breaker costs a few DynamoDB calls a second per worker,
not several per job. Probe outcomes are written at once: they decide the breaker's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Callable

from browser_task.telemetry import logger
from pagefleet.breaker import Admission, Breakers, BreakerState, domain_of
from pagefleet.models import JobError, JobRecord
from pagefleet.workflow import Goto, iter_steps
from pagefleet.workflow.templating import render

# Failures that say the *site* is failing (not the workflow): only these count.
TARGET_FAILURE_KINDS = frozenset({"navigation_failed", "target_unavailable"})

ADMISSION_CACHE_S = 2.0
# Outcomes are added up and written this often: each flush is a read and a write of the
# domain's breaker item, which at one flush a second cost ~0.7 DynamoDB calls per job.
FLUSH_INTERVAL_S = 3.0


def target_domain(record: JobRecord) -> str | None:
    """The domain a job works against: its first goto's host (None if it has no goto)."""
    for _, step in iter_steps(record.request.steps):
        if isinstance(step, Goto):
            try:
                url = render(step.url, record.request.inputs, {})
            except KeyError:
                return None  # the URL holds a secret: the worker cannot know it before claiming
            return domain_of(url)
    return None


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
    ) -> None:
        self._breakers = breakers
        self._worker = worker_id
        self._clock = clock
        self._closed_until: dict[str, float] = {}
        self._pending: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # total, failures

    async def admit(self, domain: str) -> Admission:
        if self._closed_until.get(domain, 0.0) > time.monotonic():
            return Admission(allowed=True)
        admission = await asyncio.to_thread(
            self._breakers.admit, domain, now=int(self._clock()), worker=self._worker
        )
        if admission.allowed and not admission.probe:
            self._closed_until[domain] = time.monotonic() + ADMISSION_CACHE_S
        return admission

    async def record(self, domain: str, error: JobError | None, *, probe: bool) -> None:
        failed = counts_against_target(error)
        if probe:
            # A probe that says nothing about the site (e.g. a workflow error) still ends the
            # half-open period: count it as the site having answered.
            await asyncio.to_thread(
                self._breakers.record,
                domain,
                ok=not failed,
                now=int(self._clock()),
                probe=True,
                worker=self._worker,
            )
            self._closed_until.pop(domain, None)
            return
        if failed is None:
            return
        counts = self._pending[domain]
        counts[0] += 1
        counts[1] += int(failed)

    async def flush(self) -> None:
        pending, self._pending = self._pending, defaultdict(lambda: [0, 0])
        for domain, (total, failures) in pending.items():
            try:
                state = await asyncio.to_thread(
                    self._breakers.record_counts,
                    domain,
                    total=total,
                    failures=failures,
                    now=int(self._clock()),
                )
            except Exception as exc:
                logger.warning(
                    "breaker update failed", extra={"domain": domain, "error": str(exc)[:200]}
                )
                continue
            if state is not BreakerState.CLOSED:
                self._closed_until.pop(domain, None)
                logger.warning("circuit open for domain", extra={"domain": domain})

    async def run_flusher(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(FLUSH_INTERVAL_S)
                await self.flush()
