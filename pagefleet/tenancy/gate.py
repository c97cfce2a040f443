"""The tenant limits inside the job lifecycle: running slots and the queued count.

A job takes one of its tenant's running slots before its claim and gives it back when it
leaves ``running`` (any final state, a retry, the sweeper taking back a dead worker's job).
Slots are a set of job ids, so a redelivered message or a reclaim after a dead worker
never takes a second one, and giving one back twice changes nothing. A job over the cap is
deferred: its message comes back after a growing delay, the job stays queued with the
reason, and it never counts toward the dead-letter queue.

A slot taken for a claim that then did not start the job (a duplicate of a finished job,
an early copy of a retry) is given back at once (``claim_not_made``); one a crash left behind
(a worker killed between its final write and the give back) is found when it matters: a
refused take looks at the holders and gives back the slots of jobs that are not running any
more. The queued count is repaired the same way, by
a recount when a submission is refused for it.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence

from pagefleet.backoff import Backoff, Jitter
from pagefleet.errors import NotFound
from pagefleet.jobs.hooks import Deferral
from pagefleet.jobs.ports import JobStore
from pagefleet.jobs.record import JobMessage, JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.tenancy.limits import BACKLOG_JOB_S, TenantLimits
from pagefleet.tenancy.ports import TenantCounters

log = logging.getLogger("pagefleet.tenancy")

# Deferred over the running cap: 2 s, 4 s, 8 s... up to 30 s, each plus up to half again at
# random (added jitter: never sooner than the ceiling, which would only defer again). Short
# enough that a freed slot is taken within seconds (a deep backlog always has some message
# coming back), long enough that a backlog of thousands does not spin through the queue, and
# spread so the messages do not come back together.
DEFER_BACKOFF = Backoff(2, 30, Jitter.ADDED)
DEFER_MAX_S = int(DEFER_BACKOFF.cap_s)
# A backlog spreads a tenant's messages over at most this long: with half again of jitter,
# 900 s, SQS's longest message delay.
BACKLOG_SPREAD_MAX_S = 600
# A tenant found at its cap is taken to stay there this long in this process (unless one of
# its jobs ends here): a backlog's messages are deferred without a write each.
REFUSAL_MEMORY_S = 1.0

# How often a refused take looks at the holders for slots a crash left behind.
REPAIR_EVERY_S = 5.0


def defer_delay(deferrals: int, rng: random.Random | None = None, backlog_s: float = 0) -> int:
    """How long a job over its tenant's cap waits before it is looked at again.

    Backs off with each deferral, and with the tenant's backlog: a tenant with ``queued``
    jobs and ``max_running`` slots has each job wait about ``queued / max_running`` job
    lengths (``backlog_s``), so its messages are spread over that time instead of all coming
    back every few seconds (which would fill the workers with deferrals and keep other
    tenants' messages waiting behind them)."""
    ceiling = max(DEFER_BACKOFF.ceiling(deferrals + 1), min(backlog_s, BACKLOG_SPREAD_MAX_S))
    return round(DEFER_BACKOFF.spread(ceiling, rng))


class TenantGate:
    """``JobHooks`` enforcing each tenant's running cap and keeping its queued count."""

    def __init__(
        self,
        counters: TenantCounters,
        limits: Callable[[str], TenantLimits],
        store: JobStore,
    ) -> None:
        self.counters = counters
        self.limits = limits
        self.store = store
        # When each tenant's slots were last looked at for leftovers (in this process).
        self._repaired: dict[str, float] = {}
        # tenant -> (until, holders, reason, backlog_s) of its last refusal here.
        self._refused: dict[str, tuple[float, frozenset[str], str, float]] = {}

    # --- claim --------------------------------------------------------------------------------
    def before_claim(self, message: JobMessage) -> Deferral | None:
        tenant, job_id = message.tenant_id, message.job_id
        remembered = self._refused.get(tenant)
        if remembered and remembered[0] > time.monotonic() and job_id not in remembered[1]:
            return Deferral(remembered[2], defer_delay(message.deferrals, backlog_s=remembered[3]))
        try:
            limit = self.limits(tenant).max_running
            take = self.counters.take_slot(tenant, job_id, limit=limit)
            if (
                not take.granted
                and self._may_repair(tenant)
                and self._free_stale(tenant, take.holders)
            ):
                take = self.counters.take_slot(tenant, job_id, limit=limit)
        except Exception as exc:
            # Without the counters the cap cannot be kept: wait rather than overrun it.
            log.warning("tenant limits unavailable", exc_info=True)
            return Deferral(f"tenant limits unavailable ({type(exc).__name__}); retrying", 5)
        if take.granted:
            return None
        reason = (
            f"tenant {tenant} is running {len(take.holders)} jobs, its limit "
            f"(max_running {limit}); this one starts when one of them ends"
        )
        backlog_s = self._backlog_s(tenant, limit)
        if len(self._refused) > 10_000:
            self._refused.clear()
        until = time.monotonic() + REFUSAL_MEMORY_S
        self._refused[tenant] = (until, take.holders, reason, backlog_s)
        return Deferral(reason, defer_delay(message.deferrals, backlog_s=backlog_s))

    def _backlog_s(self, tenant: str, limit: int) -> float:
        try:
            queued = self.counters.view(tenant, now_ms=int(time.time() * 1000)).queued
        except Exception:
            return 0.0
        return queued / max(1, limit) * BACKLOG_JOB_S

    def after_claim(self, job: JobRecord) -> None:
        self.after_claims([job])

    def after_claims(self, jobs: Sequence[JobRecord]) -> None:
        started: Counter[str] = Counter()
        for job in jobs:
            # A retry or a reclaim left the queued count at its job's first start.
            if job.attempt == job.attempt_base + 1:
                started[job.tenant_id] += 1
        for tenant, count in started.items():  # one write a tenant
            try:
                self.counters.sub_queued(tenant, count)
            except Exception:
                log.warning("queued count not updated after claims", exc_info=True)

    def claim_not_made(self, message: JobMessage) -> None:
        # The slot is a set member named by the job: none of its attempts runs, so none
        # holds it (a copy of a running job never comes here).
        try:
            self.counters.give_back(message.tenant_id, message.job_id)
            self._refused.pop(message.tenant_id, None)
        except Exception:
            log.warning("running slot not given back after a claim not made", exc_info=True)

    # --- every other move ---------------------------------------------------------------------
    def after_move(self, job: JobRecord) -> None:
        try:
            unstarted = job.attempt == job.attempt_base
            if job.status is not JobStatus.RUNNING and not unstarted:
                self.counters.give_back(job.tenant_id, job.job_id)
                self._refused.pop(job.tenant_id, None)  # a slot is free: look again
            if unstarted and job.status.is_settled:
                self.counters.sub_queued(job.tenant_id, 1)  # ended without ever starting
            elif unstarted and job.status is JobStatus.QUEUED:
                # Redriven: queued again. An admin's act, so it is not held to the cap.
                self.counters.add_queued(job.tenant_id, 1, limit=2**31)
        except Exception:
            log.warning("tenant counters not updated after a move", exc_info=True)

    def retention_s(self, tenant_id: str) -> int | None:
        try:
            return self.limits(tenant_id).retention_s
        except Exception:  # the retention consumer sets the expiry instead
            log.warning("tenant retention unavailable", exc_info=True)
            return None

    # --- repair -------------------------------------------------------------------------------
    def _may_repair(self, tenant: str) -> bool:
        """At most every ``REPAIR_EVERY_S`` per tenant: a tenant with a deep backlog refuses
        many takes a second, and leftovers are rare."""
        now = time.monotonic()
        if now - self._repaired.get(tenant, -REPAIR_EVERY_S) < REPAIR_EVERY_S:
            return False
        if len(self._repaired) > 10_000:
            self._repaired.clear()
        self._repaired[tenant] = now
        return True

    def _free_stale(self, tenant: str, holders: frozenset[str]) -> bool:
        """Give back the slots of holders that can never run again (gone, ended, dead-
        lettered or in review); True if any was freed. A queued or retrying holder may be a
        claim on its way, so it keeps its slot: it runs (and gives it back) or ends (and is
        freed here)."""
        stale = not_holding(self.store, tenant, holders, lambda s: s.is_settled)
        for job_id in stale:
            self.counters.give_back(tenant, job_id)
        return bool(stale)


def not_holding(
    store: JobStore, tenant: str, holders: frozenset[str], done: Callable[[JobStatus], bool]
) -> list[str]:
    """The ``holders`` of the tenant's running slots whose job is gone or ``done`` (read
    from the store, one job at a time): slots a crash left behind (logged, for the record)."""
    stale = []
    for job_id in sorted(holders):
        try:
            status: JobStatus | None = store.get(tenant, job_id).status
        except NotFound:
            status = None
        if status is not None and not done(status):
            continue
        log.warning(
            "a running slot its job no longer holds",
            extra={"tenant_id": tenant, "job_id": job_id, "status": status},
        )
        stale.append(job_id)
    return stale


def give_back_ended(counters: TenantCounters, store: JobStore) -> tuple[int, int]:
    """The sweeper's look at every tenant's running slots: the slots of jobs that ended (a
    final state, never left) or are gone are given back, each by a conditional write (two
    passes at once count it once). A job that is dead-lettered or in review may run again
    (a redrive, a resolution): its slot is left to the refused take's repair, which reads it
    when it matters. Returns (slots held, slots given back)."""
    held = removed = 0
    for tenant, holders in counters.slot_holders().items():
        held += len(holders)
        for job_id in not_holding(store, tenant, holders, lambda s: s.is_final):
            removed += counters.give_back_held(tenant, job_id)
    return held, removed
