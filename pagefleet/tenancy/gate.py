"""The tenant limits inside the job lifecycle: running slots and the queued count.

A job takes one of its tenant's running slots before its claim and gives it back when it
leaves ``running`` (any final state, a retry, the sweeper taking back a dead worker's job).
Slots are a set of job ids, so a redelivered message or a reclaim after a dead worker
never takes a second one, and giving one back twice changes nothing. A job over the cap is
deferred: its message comes back after a growing delay, the job stays queued with the
reason, and it never counts toward the dead-letter queue.

A slot taken for a claim that then did not start the job (a duplicate of a finished job,
an early retry), or one a crash left behind (a worker killed between its final write and the
give back), is found when it matters: a refused take looks at the holders and gives back the
slots of jobs that are not running any more. The queued count is repaired the same way, by
a recount when a submission is refused for it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from pagefleet.errors import NotFound
from pagefleet.jobs.hooks import Deferral
from pagefleet.models import JobMessage, JobRecord
from pagefleet.ports import JobStore
from pagefleet.states import JobStatus
from pagefleet.tenancy.limits import TenantLimits
from pagefleet.tenancy.ports import TenantCounters

log = logging.getLogger("pagefleet.tenancy")

# Deferred over the running cap: 2 s, 4 s, 8 s... up to 20 s, plus up to 1 s of jitter. Short
# enough that a freed slot is taken within seconds, long enough that a backlog of thousands
# does not spin through the queue.
DEFER_BASE_S = 2
DEFER_MAX_S = 20


def defer_delay(deferrals: int, rng: random.Random | None = None) -> int:
    base = min(DEFER_MAX_S, DEFER_BASE_S * 2 ** min(deferrals, 10))
    return base + int((rng or random).random() * 1.5)


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

    # --- claim --------------------------------------------------------------------------------
    def before_claim(self, message: JobMessage) -> Deferral | None:
        tenant, job_id = message.tenant_id, message.job_id
        try:
            limit = self.limits(tenant).max_running
            take = self.counters.take_slot(tenant, job_id, limit=limit)
            if not take.granted and self._free_stale(tenant, take.holders):
                take = self.counters.take_slot(tenant, job_id, limit=limit)
        except Exception as exc:
            # Without the counters the cap cannot be kept: wait rather than overrun it.
            log.warning("tenant limits unavailable", exc_info=True)
            return Deferral(f"tenant limits unavailable ({type(exc).__name__}); retrying", 5)
        if take.granted:
            return None
        return Deferral(
            reason=(
                f"tenant {tenant} is running {len(take.holders)} jobs, its limit "
                f"(max_running {limit}); this one starts when one of them ends"
            ),
            delay_s=defer_delay(message.deferrals),
        )

    def after_claim(self, job: JobRecord) -> None:
        if job.attempt != job.attempt_base + 1:
            return  # a retry or a reclaim: it left the queued count at its first start
        try:
            self.counters.sub_queued(job.tenant_id, 1)
        except Exception:
            log.warning("queued count not updated after a claim", exc_info=True)

    # --- every other move ---------------------------------------------------------------------
    def after_move(self, job: JobRecord) -> None:
        try:
            unstarted = job.attempt == job.attempt_base
            if job.status is not JobStatus.RUNNING and not unstarted:
                self.counters.give_back(job.tenant_id, job.job_id)
            if unstarted and (job.status.is_final or job.status is JobStatus.DEAD_LETTERED):
                self.counters.sub_queued(job.tenant_id, 1)  # ended without ever starting
            elif unstarted and job.status is JobStatus.QUEUED:
                # Redriven: queued again. An admin's act, so it is not held to the cap.
                self.counters.add_queued(job.tenant_id, 1, limit=2**31)
        except Exception:
            log.warning("tenant counters not updated after a move", exc_info=True)

    # --- repair -------------------------------------------------------------------------------
    def _free_stale(self, tenant: str, holders: frozenset[str]) -> bool:
        """Give back the slots of holders that can never run again (gone, ended or dead-
        lettered); True if any was freed. A queued or retrying holder may be a claim on its
        way, so it keeps its slot: it runs (and gives it back) or ends (and is freed here)."""
        freed = False
        for job_id in sorted(holders):
            try:
                status: JobStatus | None = self.store.get(tenant, job_id).status
            except NotFound:
                status = None
            if status is not None and not status.is_final and status is not JobStatus.DEAD_LETTERED:
                continue
            log.warning(
                "giving back a running slot its job no longer holds",
                extra={"tenant_id": tenant, "job_id": job_id, "status": status},
            )
            self.counters.give_back(tenant, job_id)
            freed = True
        return freed
