"""The worker's moves: peek, claim, heartbeat, retry-or-fail, finish, defer, expire."""

from __future__ import annotations

import contextlib
from typing import Any

from pagefleet.errors import (
    DeadlinePassed,
    IllegalTransition,
    LeaseLost,
    NotFound,
    RetryNotDue,
)
from pagefleet.jobs.lifecycle.base import LifecycleBase
from pagefleet.jobs.models import Artifact, JobError, JobMessage, JobRecord
from pagefleet.jobs.moves import Outcome, Step, Then, headline, job_message
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record_size import bound_outcome
from pagefleet.jobs.rules import (
    MAX_DELAY_S,
    attempt_allowed,
    lease_until,
)
from pagefleet.jobs.states import JobStatus


class WorkerMoves(LifecycleBase):
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
        worker: str,
    ) -> Step:
        """Take the job for a new attempt, or say what to do with its message instead.

        A written claim deletes the message: from then on the lease holds the job. The hooks
        may defer the job first (its tenant's running cap).
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
            return self._claim_refused(received, pool, message, owner)
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
            self._done(received, pool, "")
            done = self.finish(job, Outcome(JobStatus.FAILED, error=error), worker)
            return Step(done.then, reason="max_attempts spent", status=done.status)
        return self._claimed(received, pool, job)

    def _claimed(
        self, received: ReceivedMessage, pool: str, job: JobRecord, reason: str = ""
    ) -> Step:
        """The claim is written: the message is done with (a failed delete brings it back
        as a copy of a running job, deleted then)."""
        self.hooks.after_claim(job)
        if self.later is not None:
            with contextlib.suppress(RuntimeError):  # stopping (executor shut down): now
                self.later(self._done, received, pool, reason)
                return Step(Then.RUN, job=job, reason=reason)
        self._done(received, pool, reason)
        return Step(Then.RUN, job=job, reason=reason)

    def _claim_refused(
        self, received: ReceivedMessage, pool: str, message: JobMessage, owner: str
    ) -> Step:
        try:
            current = self.store.get(message.tenant_id, message.job_id)
        except NotFound:
            return self._done(received, pool, "job not found")
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"reading the job failed: {headline(exc)}")
        if current.status is JobStatus.RUNNING and current.lease_owner == owner:
            return self._claimed(received, pool, current, "claim applied though its reply was lost")
        if current.status.is_final:
            return self._done(received, pool, f"duplicate delivery ({current.status.value})")
        if current.status is JobStatus.RUNNING:
            # Another attempt holds a live lease; if its worker dies, the lease is taken back
            # and the job sent again. This copy asks for nothing more.
            return self._done(received, pool, "a copy of a job running elsewhere")
        if current.status is JobStatus.WAITING:
            # Its release sends a message of its own: this one is a stray copy.
            return self._done(received, pool, "the job waits for its parents")
        return Step(Then.LEAVE, reason=f"cannot start a {current.status.value} job now")

    def heartbeat(self, job: JobRecord, *, lease_seconds: int) -> list[str]:
        """Extend the record's lease (the message is gone since the claim); raises
        ``LeaseLost``. Returns what failed without losing the lease (a warning, not a stop).
        """
        problems = []
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

    def finish(self, job: JobRecord, outcome: Outcome, worker: str) -> Step:
        """Write the attempt's outcome (fenced) and send a retry's message.

        The claim deleted the job's message: an outcome not written leaves the job running
        until its lease runs out and it is taken back.
        """
        at = self.at()
        retrying = outcome.status is JobStatus.RETRY_SCHEDULED
        delay = outcome.retry_delay_s or 0
        # Every part is bounded so that the record always fits in one item.
        bounded = bound_outcome(job, outcome, worker=worker, at=at)
        keep_s = self.hooks.retention_s(job.tenant_id) if outcome.status.is_final else None
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
                expires_at=self.now() + keep_s if keep_s is not None else None,
                changes=bounded.changes,
            )
        except (LeaseLost, IllegalTransition) as exc:
            if not self._landed(job, outcome):
                return Step(Then.LEAVE, reason=f"outcome not written: {exc.message}")
        except Exception as exc:
            return Step(Then.LEAVE, reason=f"writing the outcome failed: {headline(exc)}")
        self.hooks.after_move(job.model_copy(update={"status": outcome.status}))
        if retrying:
            try:
                # Handed back by a stopping worker: at once, ahead of the queue.
                self.send(job, delay_s=delay, ahead=outcome.release_message)
            except Exception as exc:
                # The sweeper re-sends a retry whose message is overdue (RETRY_GRACE_S).
                return Step(
                    Then.DELETE,
                    status=outcome.status,
                    reason=f"could not enqueue the retry: {headline(exc)}; the sweeper will",
                )
        return Step(Then.DELETE, status=outcome.status)

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
