"""What every part of the lifecycle shares: the ports, the time, the one way a job message
is sent, and what is done with the message that asked for a move."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pagefleet.errors import EnqueueFailed, IllegalTransition, NotFound
from pagefleet.jobs.hooks import NO_HOOKS, JobHooks
from pagefleet.jobs.models import iso
from pagefleet.jobs.moves import MessageAnswer, Then, expired_error
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock, JobQueue, JobStore, ReceivedMessage
from pagefleet.jobs.record import JobMessage, JobRecord
from pagefleet.jobs.rules import (
    MAX_DELAY_S,
    MAX_VISIBILITY_S,
)
from pagefleet.jobs.states import JobStatus


class LifecycleBase:
    def __init__(
        self,
        store: JobStore,
        queue: JobQueue,
        clock: Clock = SYSTEM_CLOCK,
        *,
        hooks: JobHooks = NO_HOOKS,
        later: Callable[..., object] | None = None,
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        # The tenant limits: a slot taken before each claim, given back after moves.
        self.hooks = hooks
        # Runs what nothing waits for once a claim is written (its message's delete): a
        # worker passes its background executor's submit, so the delete is off the job's
        # path. None: at once.
        self.later = later

    # --- time ---------------------------------------------------------------------------------
    def now(self) -> int:
        return int(self.clock.now())

    def at(self) -> str:
        return iso(datetime.fromtimestamp(self.clock.now(), UTC))

    def instant(self) -> tuple[int, str]:
        """Now, read once: epoch seconds and the ISO time a record shows, which agree."""
        now = self.clock.now()
        return int(now), iso(datetime.fromtimestamp(now, UTC))

    def job_in(self, tenant_id: str, job_id: str, status: JobStatus) -> JobRecord | None:
        """The job if it exists and is in ``status`` (a move's first look); else None."""
        try:
            job = self.store.get(tenant_id, job_id)
        except NotFound:
            return None
        return job if job.status is status else None

    # --- the one way a job message is sent -----------------------------------------------------
    def send(self, job: JobRecord, *, delay_s: int = 0, ahead: bool = False) -> None:
        """``ahead``: on its pool's high-priority queue, for a job that already waited its
        turn once and lost it through no fault of its own (its worker died or stopped)."""
        message = JobMessage.for_job(job, preview=True)
        if ahead:
            message = message.model_copy(update={"priority": "high"})
        self.queue.send(message, delay_seconds=max(0, min(delay_s, MAX_DELAY_S)))

    def enqueue(self, job: JobRecord, *, delay_s: int = 0) -> JobRecord:
        """Send a recorded job's message and note that it is in the queue.

        A scheduled job's message is delayed to its start (SQS delays up to 15 minutes;
        the sweeper dispatches jobs due later when they come within reach); ``delay_s``
        delays any job's message at least that much (a tenant's deep backlog is spread).
        """
        delay = delay_s
        if job.status is JobStatus.SCHEDULED and job.run_at is not None:
            delay = max(delay, math.ceil(job.run_at - self.clock.now()))
        try:
            self.send(job, delay_s=delay)
        except Exception as exc:
            raise EnqueueFailed(
                "the job was recorded but could not be queued; retry with the same Idempotency-Key",
                job_id=job.job_id,
            ) from exc
        at = self.at()
        self.store.mark_enqueued(job.tenant_id, job.job_id, at)
        return job.model_copy(update={"enqueued_at": at})

    def expire(self, tenant_id: str, job_id: str) -> bool:
        """A job not started before its deadline never runs. True if this call expired it."""
        try:
            self._transition(tenant_id, job_id, JobStatus.EXPIRED, error=expired_error())
        except (IllegalTransition, NotFound):
            return False  # someone else (the sweeper, a cancel) ended it first
        return True

    def _transition(self, tenant_id: str, job_id: str, to: JobStatus, **kw: Any) -> JobRecord:
        """A move the hooks hear of (the tenant's running slots and queued count)."""
        moved = self.store.transition(tenant_id, job_id, to, at=self.at(), **kw)
        self.hooks.after_move(moved)
        return moved

    def _transition_unheard(
        self, tenant_id: str, job_id: str, to: JobStatus, **kw: Any
    ) -> JobRecord:
        """A move the hooks do not hear of (a job taken back keeps its running slot)."""
        return self.store.transition(tenant_id, job_id, to, at=self.at(), **kw)

    # --- messages -------------------------------------------------------------------------------
    # A job's message only asks for a claim: once the claim is written the message is deleted
    # and the lease holds the job (a dead worker's job is taken back when its lease runs
    # out), so SQS's age and in-flight counts see jobs that wait, never jobs that run.
    def _done(self, received: ReceivedMessage, pool: str, reason: str) -> MessageAnswer:
        try:
            self.queue.delete(pool, received.receipt_handle)
        except Exception as exc:  # it comes back and is recognised as done then
            return MessageAnswer(Then.LEAVE, reason=f"{reason}; deleting the message failed: {exc}")
        return MessageAnswer(Then.DELETE, reason=reason)

    def _hide(
        self, received: ReceivedMessage, pool: str, seconds: int, reason: str
    ) -> MessageAnswer:
        with contextlib.suppress(Exception):
            self.queue.change_visibility(
                pool, received.receipt_handle, min(seconds, MAX_VISIBILITY_S)
            )
        return MessageAnswer(Then.HIDE, reason=f"{reason}; hidden {seconds} s")

    def _release(self, received: ReceivedMessage, pool: str) -> None:
        with contextlib.suppress(Exception):
            self.queue.change_visibility(pool, received.receipt_handle, 0)

    def release(self, received: ReceivedMessage, pool: str) -> MessageAnswer:
        """Make a message visible again at once (this worker will not work on it)."""
        self._release(received, pool)
        return MessageAnswer(Then.RELEASE, reason="handed back")
