"""What a slot does ahead of time, and what it leaves for later, to keep a job's path short.

A slot's path between two jobs was its next receive, the look at the job (a read), the
claim's writes, opening a context, starting the trace, and after the workflow the uploads,
all while its browser sat idle or waited. These parts leave that path:

- **Looking ahead.** When a job's workflow has ended (its context closing), the slot
  already receives its next message and reads its job. Only reads and the receive move
  earlier: the claim (the tenant's running slot, the lease) is still taken when the slot is
  free, so no tenant holds a slot for a job that is not running. A message received ahead
  waits at most the closing; a stopping worker hands it back. Not earlier (say, as the last
  step begins): a message taken while a long last step runs would pass over a higher
  priority job submitted meanwhile.
- **The context opens while the claim is written** (browser_task.run.early), and the trace
  starts beside opening the page.
- **The slot is free once the context is closed** (``run.signals.SlotSignals.released``): the
  uploads and the outcome's write finish in the background while the next job starts. The
  worker's drain waits for them, and the job counts as in progress (task protection) until
  its outcome is written.
- **Hooks after the claim, later and together.** The tenant's queued count drops by one when
  a job first starts (``JobHooks.after_claim``); nothing waits for that number, so the
  worker gathers its claims and tells the hooks within a second, a tenant's starts in one
  write (``JobHooks.after_claims``), as the claimed messages' deletes go ten a request
  (browser_task.slot.deletes, sent from ``Lifecycle.later``). The count is then up to a
  second high; a worker killed meanwhile leaves it high, as a crash between a claim and
  its decrement always could, and the recount a refused submission runs repairs it
  (pagefleet.tenancy.gate). The decision before a claim (the running cap) stays on the
  path: it decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from browser_task.gathered import Gathered, GatheredPart
from pagefleet.jobs.hooks import Deferral, JobHooks
from pagefleet.jobs.record import JobMessage, JobRecord

# How long a claim's after-claim work may wait for others to share its writes.
AFTER_CLAIM_WITHIN_S = 1.0


class LaterHooks(GatheredPart):
    """``JobHooks`` whose ``after_claim`` is gathered per tenant and told to the hooks'
    ``after_claims`` within ``within_s`` (``run_flusher``), and the rest at the worker's
    stop (``flush``)."""

    def __init__(
        self,
        hooks: JobHooks,
        *,
        within_s: float = AFTER_CLAIM_WITHIN_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hooks = hooks
        # tenant -> the jobs claimed and not told yet
        self._gathered: Gathered[str, JobRecord] = Gathered(
            self._tell, within_s=within_s, monotonic=monotonic
        )

    def before_claim(self, message: JobMessage) -> Deferral | None:
        return self.hooks.before_claim(message)

    def after_claim(self, job: JobRecord) -> None:
        self._gathered.add(job.tenant_id, job)

    def after_claims(self, jobs: Sequence[JobRecord]) -> None:
        for job in jobs:
            self.after_claim(job)

    def claim_not_made(self, message: JobMessage) -> None:
        self.hooks.claim_not_made(message)

    def after_move(self, job: JobRecord) -> None:
        self.hooks.after_move(job)

    def retention_s(self, tenant_id: str) -> int | None:
        return self.hooks.retention_s(tenant_id)

    def _tell(self, tenant_id: str, jobs: list[JobRecord]) -> None:
        self.hooks.after_claims(jobs)  # hooks never raise (pagefleet.jobs.hooks)
