"""THE job lifecycle: every move of a job, and the one way to send a job message.

The API (submit, cancel, redrive), the worker (claim, heartbeat, finish, defer), the
dead-letters handler and the sweeper all move jobs through this class and nothing else.
Each move is one conditional write in the ``JobStore`` (the transition table and the
attempt/owner fence are enforced there); what happens to the SQS message that asked for the
move (delete, hide, hand back) is decided and done here too, so the whole life of a
message can be tested on in-memory fakes.

Every method is safe to run twice or concurrently: a refused write means someone else
moved the job first, and the answer says what to do with the message.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from pagefleet.errors import (
    DeadlinePassed,
    EnqueueFailed,
    IllegalTransition,
    JobNotCancellable,
    LeaseLost,
    NotFound,
    RetryNotDue,
)
from pagefleet.jobs.hooks import NO_HOOKS
from pagefleet.jobs.limits import bound_outcome
from pagefleet.jobs.moves import Outcome, Step, Then, expired_error, headline, job_message
from pagefleet.jobs.rules import (
    LEASE_MARGIN_S,
    MAX_DELAY_S,
    MAX_VISIBILITY_S,
    attempt_allowed,
    lease_until,
)
from pagefleet.models import Artifact, JobError, JobMessage, JobRecord, iso
from pagefleet.ports import SYSTEM_CLOCK, Clock, JobQueue, JobStore, ReceivedMessage
from pagefleet.states import JobStatus

# Re-exported: the worker takes these from here with the Lifecycle.
__all__ = ["Lifecycle", "Outcome", "Step", "Then", "expired_error"]


class Lifecycle:
    hooks = NO_HOOKS  # tenant limits: a slot taken before each claim, given back after moves

    def __init__(self, store: JobStore, queue: JobQueue, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock

    # --- time ---------------------------------------------------------------------------------
    def now(self) -> int:
        return int(self.clock.now())

    def at(self) -> str:
        return iso(datetime.fromtimestamp(self.clock.now(), UTC))

    # --- the one way a job message is sent -----------------------------------------------------
    def send(self, job: JobRecord, *, delay_s: int = 0) -> None:
        self.queue.send(JobMessage.for_job(job), delay_seconds=max(0, min(delay_s, MAX_DELAY_S)))

    def enqueue(self, job: JobRecord, *, delay_s: int = 0) -> JobRecord:
        """Send a recorded job's message and note that it is in the queue."""
        try:
            self.send(job, delay_s=delay_s)
        except Exception as exc:
            raise EnqueueFailed(
                "the job was recorded but could not be queued; retry with the same Idempotency-Key",
                job_id=job.job_id,
            ) from exc
        at = self.at()
        self.store.mark_enqueued(job.tenant_id, job.job_id, at)
        return job.model_copy(update={"enqueued_at": at})

    # --- the worker's side ----------------------------------------------------------------------
    def peek(self, received: ReceivedMessage, pool: str) -> Step:
        """Look at the job before claiming it (the breaker needs its target)."""
        message = job_message(received)
        try:
            job = self.store.get(message.tenant_id, message.job_id, consistent=False)
        except NotFound:
            return self._done(received, pool, "job not found")
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"reading the job failed: {headline(exc)}")
        if job.status.is_final:  # final states never change: a stale read is still right
            return self._done(received, pool, f"duplicate delivery ({job.status.value})")
        return Step(Then.RUN, job=job)

    def claim(
        self,
        received: ReceivedMessage,
        pool: str,
        *,
        owner: str,
        lease_seconds: int,
        recheck_s: int,
        worker: str,
    ) -> Step:
        """Take the job for a new attempt, or say what to do with its message instead.

        ``recheck_s`` bounds how long a copy of a job running elsewhere is hidden before it
        is looked at again. The hooks may defer the job first (its tenant's running cap).
        """
        message = job_message(received)
        if (deferral := self.hooks.before_claim(message)) is not None:
            return self.defer(received, pool, reason=deferral.reason, delay_s=deferral.delay_s)
        now = self.clock.now()
        try:
            job = self.store.claim(
                message.tenant_id,
                message.job_id,
                owner=owner,
                lease_until=lease_until(now, lease_seconds),
                now=int(now),
                started_at=self.at(),
            )
        except NotFound:
            return self._done(received, pool, "job not found")
        except DeadlinePassed:
            written = self.expire(message.tenant_id, message.job_id)
            status = JobStatus.EXPIRED if written else None
            step = self._done(received, pool, "the job expired before it started")
            return Step(step.then, reason=step.reason, status=status)
        except RetryNotDue as early:
            # An early duplicate of a retry's message: bring it back when the retry is due.
            due = int(early.details.get("retry_at", now)) - int(now)
            return self._hide(received, pool, max(1, due), "retry not due yet")
        except IllegalTransition:
            return self._claim_refused(received, pool, message, owner, recheck_s)
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"claim failed: {headline(exc)}")
        if not attempt_allowed(job, job.attempt):
            # A reclaim after the last allowed attempt's worker died: no attempt is left.
            error = JobError(
                kind="lease_expired",
                message=(
                    f"the worker of attempt {job.attempt - 1} stopped without finishing and "
                    f"max_attempts ({job.request.max_attempts}) is spent"
                ),
                timeout="lease",
            )
            done = self.finish(job, Outcome(JobStatus.FAILED, error=error), received, pool, worker)
            return Step(done.then, reason="max_attempts spent", status=done.status)
        self.hooks.after_claim(job)
        return Step(Then.RUN, job=job)

    def _claim_refused(
        self,
        received: ReceivedMessage,
        pool: str,
        message: JobMessage,
        owner: str,
        recheck_s: int,
    ) -> Step:
        try:
            current = self.store.get(message.tenant_id, message.job_id)
        except NotFound:
            return self._done(received, pool, "job not found")
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"reading the job failed: {headline(exc)}")
        if current.status is JobStatus.RUNNING and current.lease_owner == owner:
            self.hooks.after_claim(current)
            return Step(Then.RUN, job=current, reason="claim applied though its reply was lost")
        if current.status.is_final:
            return self._done(received, pool, f"duplicate delivery ({current.status.value})")
        if current.status is JobStatus.RUNNING and current.lease_expires_at is not None:
            # Another attempt holds a live lease. Keep this copy hidden until that lease would
            # run out: if its worker finishes, the copy is deleted as a duplicate then; if it
            # dies, the copy is what brings the job back.
            wait = max(1, current.lease_expires_at - self.now() + LEASE_MARGIN_S)
            return self._hide(received, pool, min(wait, recheck_s), "running elsewhere")
        return Step(Then.LEAVE, reason=f"cannot start a {current.status.value} job now")

    def heartbeat(
        self, job: JobRecord, received: ReceivedMessage, pool: str, *, lease_seconds: int
    ) -> list[str]:
        """Extend the message's visibility and the record's lease; raises ``LeaseLost``.

        Returns what failed without losing the lease (worth a warning, not a stop).
        """
        problems = []
        try:
            self.queue.change_visibility(pool, received.receipt_handle, lease_seconds)
        except Exception as exc:
            problems.append(f"visibility: {headline(exc)}")
        try:
            self.store.extend_lease(
                job.tenant_id,
                job.job_id,
                attempt=job.attempt,
                owner=job.lease_owner or "",
                lease_until=lease_until(self.clock.now(), lease_seconds),
            )
        except LeaseLost:
            raise
        except Exception as exc:
            problems.append(f"lease: {headline(exc)}")
        return problems

    def cancel_requested(self, job: JobRecord) -> bool:
        return self.store.cancel_requested(job.tenant_id, job.job_id)

    def after_failure(
        self,
        job: JobRecord,
        error: JobError,
        *,
        result: dict[str, Any] | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> Outcome:
        """Retry or fail: the one place that applies the attempt budget to a failure."""
        if error.retryable and attempt_allowed(job, job.attempt + 1):
            return Outcome(
                JobStatus.RETRY_SCHEDULED,
                result=result or None,
                error=error,
                artifacts=list(artifacts or []),
                retry_delay_s=job.request.retry.delay_seconds(job.attempts_used),
            )
        return Outcome(
            JobStatus.FAILED, result=result or None, error=error, artifacts=list(artifacts or [])
        )

    def finish(
        self,
        job: JobRecord,
        outcome: Outcome,
        received: ReceivedMessage,
        pool: str,
        worker: str,
    ) -> Step:
        """Write the attempt's outcome (fenced), send a retry's message, settle the message."""
        at = self.at()
        retrying = outcome.status is JobStatus.RETRY_SCHEDULED
        delay = outcome.retry_delay_s or 0
        # Every part is bounded so that the record always fits in one item.
        bounded = bound_outcome(job, outcome, worker=worker, at=at)
        try:
            self.store.finish(
                job.tenant_id,
                job.job_id,
                attempt=job.attempt,
                owner=job.lease_owner or worker,
                status=outcome.status,
                at=at,
                result=bounded.result,
                artifacts=bounded.artifacts,
                error=bounded.error,
                history=bounded.history,
                retry_at=self.now() + delay if retrying else None,
                result_artifact=bounded.result_artifact,
                result_bytes=bounded.result_bytes,
                attempt_log=bounded.attempt_log,
            )
        except (LeaseLost, IllegalTransition) as exc:
            if not self._landed(job, outcome):
                return Step(Then.LEAVE, reason=f"outcome not written: {exc.message}")
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"writing the outcome failed: {headline(exc)}")
        self.hooks.after_move(job.model_copy(update={"status": outcome.status}))
        if outcome.release_message:
            self._release(received, pool)
            return Step(Then.RELEASE, status=outcome.status)
        if retrying and outcome.retry_delay_s is not None:
            try:
                self.send(job, delay_s=delay)
            except Exception as exc:
                # Keep the original message: redelivered, it claims the retry_scheduled job.
                return Step(
                    Then.LEAVE,
                    status=outcome.status,
                    reason=f"could not enqueue the retry: {headline(exc)}",
                )
        step = self._done(received, pool, "")
        return Step(step.then, status=outcome.status, reason=step.reason)

    def _landed(self, job: JobRecord, outcome: Outcome) -> bool:
        """After a refused finish: did our own earlier try land (its reply lost on the way)?"""
        try:
            current = self.store.get(job.tenant_id, job.job_id)
        except Exception:
            return False
        return (
            current.attempt == job.attempt
            and current.status is outcome.status
            and any(a.attempt == job.attempt for a in current.attempts)
        )

    def defer(self, received: ReceivedMessage, pool: str, *, reason: str, delay_s: int) -> Step:
        """The job must wait (e.g. its target's circuit is open) without spending an attempt.

        The message is re-sent with a delay (and the received one deleted) rather than
        hidden, so waiting never counts toward the dead-letter queue's receive limit.
        """
        message = job_message(received)
        delay = max(1, min(MAX_DELAY_S, delay_s))
        again = message.model_copy(update={"deferrals": message.deferrals + 1})  # backs off
        try:
            self.queue.send(again, delay_seconds=delay)
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"could not defer the job: {headline(exc)}")
        with contextlib.suppress(Exception):  # the reason is a courtesy to the user
            self.store.defer(message.tenant_id, message.job_id, reason=reason, at=self.at())
        return self._done(received, pool, reason)

    def expire(self, tenant_id: str, job_id: str) -> bool:
        """A job not started before its deadline never runs. True if this call expired it."""
        try:
            self._transition(tenant_id, job_id, JobStatus.EXPIRED, error=expired_error())
        except (IllegalTransition, NotFound):
            return False  # someone else (the sweeper, a cancel) ended it first
        return True

    # --- the API's side -------------------------------------------------------------------------
    def cancel(self, tenant_id: str, job_id: str) -> JobRecord:
        """At once if the job has not started; through its worker if it is running."""
        for _ in range(3):  # the job may start or finish while we look at it
            job = self.store.get(tenant_id, job_id)
            if job.status.is_final:
                raise JobNotCancellable(
                    f"job {job_id} already ended as {job.status.value}", status=job.status.value
                )
            try:
                if job.status is JobStatus.RUNNING:
                    return self.store.request_cancel(tenant_id, job_id, at=self.at())
                return self._transition(tenant_id, job_id, JobStatus.CANCELLED)
            except IllegalTransition:
                continue
        raise JobNotCancellable(f"job {job_id} kept changing state; retry the cancel")

    def redrive(self, tenant_id: str, job_id: str) -> bool:
        """A dead-lettered job goes back to its queue with a fresh attempt budget."""
        try:
            job = self._transition(tenant_id, job_id, JobStatus.QUEUED)
        except (IllegalTransition, NotFound):
            return False
        self.enqueue(job.model_copy(update={"enqueued_at": None}))
        return True

    # --- the dead-letter queue's and the sweeper's side -----------------------------------------
    def dead_letter(self, received: ReceivedMessage) -> str:
        """Record why a message landed in the DLQ. Returns what happened (logs, tests)."""
        message = received.message
        if message is None:
            return "poison"  # not a job message: nothing to mark
        try:
            current = self.store.get(message.tenant_id, message.job_id)
        except NotFound:
            return "unknown_job"
        if current.status is JobStatus.RUNNING and (current.lease_expires_at or 0) >= self.now():
            return "alive"  # a live lease: this was a stale duplicate of the job's message
        reason = JobError(
            kind="dead_lettered",
            message=(
                f"the job's message was received {received.receive_count} times without "
                "finishing; it was moved to the dead-letter queue"
            ),
            retryable=True,
        )
        try:
            self._transition(
                message.tenant_id, message.job_id, JobStatus.DEAD_LETTERED, error=reason
            )
        except NotFound:
            return "unknown_job"
        except IllegalTransition:
            return "already_final"  # finished (or already dead-lettered) before the DLQ saw it
        return "marked"

    def take_back(self, tenant_id: str, job_id: str, *, expired_before: int) -> str:
        """A running job whose worker stopped heartbeating: retry it, or fail it when the
        budget is spent. Returns "requeued", "failed", "alive" or "gone"."""
        try:
            job = self.store.get(tenant_id, job_id)
        except NotFound:
            return "gone"
        if job.status is not JobStatus.RUNNING or (job.lease_expires_at or 0) >= expired_before:
            return "alive"
        error = JobError(
            kind="lease_expired",
            message=f"worker lost its lease on attempt {job.attempt} (it stopped heartbeating)",
            retryable=True,
            timeout="lease",
        )
        retry = attempt_allowed(job, job.attempt + 1)
        try:
            moved = self._transition(
                tenant_id,
                job_id,
                JobStatus.RETRY_SCHEDULED if retry else JobStatus.FAILED,
                error=error,
                lease_expired_before=expired_before,
                retry_at=self.now(),
            )
        except IllegalTransition:
            return "alive"  # the heartbeat came back, or another sweeper got there first
        if not retry:
            return "failed"
        self.send(moved)
        return "requeued"

    def resend_retry(self, tenant_id: str, job_id: str, *, look_again_at: int) -> bool:
        """A retry whose message never came back: send it again."""
        try:
            job = self.store.get(tenant_id, job_id)
        except NotFound:
            return False
        if job.status is not JobStatus.RETRY_SCHEDULED:
            return False
        self.send(job)
        self.store.postpone_retry(tenant_id, job_id, due=look_again_at)
        return True

    def _transition(self, tenant_id: str, job_id: str, to: JobStatus, **kw: Any) -> JobRecord:
        moved = self.store.transition(tenant_id, job_id, to, at=self.at(), **kw)
        self.hooks.after_move(moved)
        return moved

    # --- messages -------------------------------------------------------------------------------
    def _done(self, received: ReceivedMessage, pool: str, reason: str) -> Step:
        try:
            self.queue.delete(pool, received.receipt_handle)
        except Exception as exc:  # it comes back and is recognised as done then
            return Step(Then.LEAVE, reason=f"{reason}; deleting the message failed: {exc}")
        return Step(Then.DELETE, reason=reason)

    def _hide(self, received: ReceivedMessage, pool: str, seconds: int, reason: str) -> Step:
        with contextlib.suppress(Exception):
            self.queue.change_visibility(
                pool, received.receipt_handle, min(seconds, MAX_VISIBILITY_S)
            )
        return Step(Then.HIDE, reason=f"{reason}; hidden {seconds} s")

    def _release(self, received: ReceivedMessage, pool: str) -> None:
        with contextlib.suppress(Exception):
            self.queue.change_visibility(pool, received.receipt_handle, 0)

    def release(self, received: ReceivedMessage, pool: str) -> Step:
        """Make a message visible again at once (this worker will not work on it)."""
        self._release(received, pool)
        return Step(Then.RELEASE, reason="handed back")
