"""The worker's side of the lease: keeping its own jobs' leases, and taking back the jobs of
its pool's dead workers.

A job's message is deleted once its claim is written (``pagefleet.jobs.lifecycle``), so the
lease alone says a job is in good hands:

- ``LeaseKeeper`` extends a claimed job's lease every ``heartbeat_seconds`` from the claim
  until its outcome is written, uploads and the outcome's write included (a lease that ran
  out while the outcome waited for a slow write made a finished job look abandoned).
- ``LeaseWatch`` looks at the ``lease`` set of the jobs table's ops index when the next
  lease it knows of ends (plus ``LEASE_GRACE_S`` and half a second of spread between workers),
  and takes back its pool's jobs whose lease ran out: a killed worker's job starts again
  about a lease after its last heartbeat, without waiting for the sweeper's minute. A lease
  taken after a look ends no sooner than a lease from then, so looking at least that often
  misses nothing; a busy pool's leases are pushed out by their heartbeats, so a look is
  rare (one every ``lease - heartbeat`` seconds or so, eight small queries).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

from browser_task.errors import first_line
from browser_task.observe.telemetry import JobLog
from pagefleet.errors import LeaseLost
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import LEASE_GRACE_S, LEASE_MARGIN_S, lease_ended_before
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.sweeper import TakeBacks, take_back_expired

# Between two looks of the watch: at least this long, plus up to SPREAD_S at random so the
# pool's workers do not all take back the same job at once (one would; the others read).
MIN_WAIT_S = 0.25
SPREAD_S = 0.5
# After a look that failed (the table unreachable), the next one.
RETRY_WAIT_S = 5.0


class LeaseKeeper:
    """Extends one claimed job's lease until ``stop()``; ``lost`` is set if another attempt
    took the job (this worker must then write nothing)."""

    def __init__(
        self, lifecycle: Lifecycle, job: JobRecord, *, lease_s: int, every_s: float, log: JobLog
    ) -> None:
        self._lifecycle = lifecycle
        self._job = job
        self._lease_s = lease_s
        self._every_s = every_s
        self._log = log
        self.lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> LeaseKeeper:
        self._task = asyncio.create_task(self._beat(), name=f"lease {self._job.job_id}")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)
            try:
                problems = await asyncio.to_thread(
                    self._lifecycle.heartbeat, self._job, lease_seconds=self._lease_s
                )
            except LeaseLost:
                self.lost.set()
                return
            for problem in problems:
                self._log.warning("heartbeat failed", error=problem)


class LeaseWatch:
    """Takes back this pool's jobs whose worker stopped heartbeating."""

    def __init__(
        self,
        services: JobServices,
        *,
        pool: str,
        lease_s: int,
        log: JobLog,
        on_dead_lettered: Callable[[int], None] = lambda _n: None,
        on_sessions_lost: Callable[[int], None] = lambda _n: None,
        rng: random.Random | None = None,
    ) -> None:
        self._svc = services
        self._pool = pool
        # A lease taken after a look ends at least this long after it.
        self._horizon = max(MIN_WAIT_S, float(lease_s - LEASE_MARGIN_S))
        self._log = log
        self._on_dead_lettered = on_dead_lettered
        self._on_sessions_lost = on_sessions_lost
        self._rng = rng or random.Random()

    def look(self) -> float:
        """Take back what ran out; how long until the next look (seconds)."""
        now = self._svc.clock.now()
        taken = take_back_expired(self._svc, now=now, pool=self._pool)
        self._report(taken)
        # The leases not over yet (by the grace): the first of them is the next to look at.
        upcoming = self._svc.store.next_due("lease", lease_ended_before(now))
        if upcoming is None:
            return self._horizon
        wait = upcoming + LEASE_GRACE_S - now + self._rng.random() * SPREAD_S
        return min(self._horizon, max(MIN_WAIT_S, wait))

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                wait = await asyncio.to_thread(self.look)
            except Exception as exc:
                self._log.warning("lease watch failed", error=first_line(str(exc)))
                wait = RETRY_WAIT_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), wait)

    def _report(self, taken: TakeBacks) -> None:
        if taken.requeued or taken.failed or taken.dead_lettered:
            self._log.info(
                "took back jobs whose worker stopped",
                requeued=taken.requeued,
                failed=taken.failed,
                dead_lettered=taken.dead_lettered,
                job_ids=taken.jobs,
            )
        if taken.dead_lettered:
            self._on_dead_lettered(taken.dead_lettered)
        if taken.sessions_lost:
            self._log.warning("browser sessions lost", count=taken.sessions_lost)
            self._on_sessions_lost(taken.sessions_lost)
