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
- **Hooks after the claim, later.** The tenant's queued count drops by one when a job first
  starts (``JobHooks.after_claim``); nothing waits for that number, so it is written by a
  background thread instead of before the job runs, as is the claimed message's delete
  (``Lifecycle.later``; the delete itself goes with others, ten a request within a second:
  browser_task.slot.deletes). The decision before a claim (the running cap) stays on the path:
  it decides.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from pagefleet.jobs.hooks import Deferral, JobHooks
from pagefleet.jobs.record import JobMessage, JobRecord


class LaterHooks:
    """``JobHooks`` whose ``after_claim`` runs through ``later`` (e.g. an executor's submit)."""

    def __init__(self, hooks: JobHooks, later: Callable[..., Future[Any]]) -> None:
        self.hooks = hooks
        self._later = later

    def before_claim(self, message: JobMessage) -> Deferral | None:
        return self.hooks.before_claim(message)

    def after_claim(self, job: JobRecord) -> None:
        try:
            self._later(self.hooks.after_claim, job)
        except RuntimeError:  # the worker is stopping (its executor is shut down): now
            self.hooks.after_claim(job)

    def claim_not_made(self, message: JobMessage) -> None:
        self.hooks.claim_not_made(message)

    def after_move(self, job: JobRecord) -> None:
        self.hooks.after_move(job)

    def retention_s(self, tenant_id: str) -> int | None:
        return self.hooks.retention_s(tenant_id)
