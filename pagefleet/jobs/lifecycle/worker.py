"""The worker's moves: peek, claim, heartbeat, checkpoints, retry-or-fail, finish, defer."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from pagefleet.errors import (
    DeadlinePassed,
    IllegalTransition,
    LeaseLost,
    NotFound,
    RetryNotDue,
)
from pagefleet.jobs.checkpoints import Checkpoint, Compensation, for_review
from pagefleet.jobs.lifecycle.base import LifecycleBase
from pagefleet.jobs.moves import MessageAnswer, Outcome, Then, headline, job_message, review_error
from pagefleet.jobs.ports import ReceivedMessage, RunSignals
from pagefleet.jobs.record import Artifact, JobError, JobMessage, JobRecord
from pagefleet.jobs.record_size import INLINE_RESULT_MAX_BYTES, bound_outcome, json_bytes
from pagefleet.jobs.rules import (
    MAX_DELAY_S,
    LeaseRenewal,
    Resume,
    after_failed_attempt,
    after_lost_run,
    another_carries_it,
    attempt_allowed,
    dead_worker_error,
    lease_until,
    lost_lease_error,
    reclaimed_at_limit,
    resume_plan,
)
from pagefleet.jobs.states import JobStatus


class WorkerMoves(LifecycleBase):
    def peek(self, received: ReceivedMessage, pool: str) -> MessageAnswer:
        """Look at the job before claiming it (the breaker needs its target): in the
        message's preview when it carries one, else in the record (an eventually consistent
        read). A copy of a finished job's message that carried one is dropped by its claim's
        refusal instead (``_claim_refused``)."""
        message = job_message(received)
        if (carried := message.preview_carried) is not None:
            return MessageAnswer(Then.RUN, preview=carried)
        try:
            job = self.store.get(message.tenant_id, message.job_id, consistent=False)
        except NotFound:
            return self._done(received, pool, "job not found")
        except Exception as exc:
            return MessageAnswer(Then.LEAVE, reason=f"reading the job failed: {headline(exc)}")
        if job.status.is_final:  # final states never change: a stale read is still right
            return self._done(received, pool, f"duplicate delivery ({job.status.value})")
        if another_carries_it(job, received.message_id, self.clock.now()):
            return self._done(received, pool, "duplicate delivery (already deferred)")
        return MessageAnswer(Then.RUN, job=job, preview=job.preview())

    def claim(
        self,
        received: ReceivedMessage,
        pool: str,
        *,
        owner: str,
        lease_seconds: int,
        worker: str,
        events: int = 0,
    ) -> MessageAnswer:
        """Take the job for a new attempt, or say what to do with its message instead;
        ``events`` run-event numbers reserved with it (on a record that counts them).

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
                events=events,
            )
        except NotFound:
            self.hooks.claim_not_made(message)
            return self._done(received, pool, "job not found")
        except DeadlinePassed:
            written = self.expire(message.tenant_id, message.job_id)
            self.hooks.claim_not_made(message)
            status = JobStatus.EXPIRED if written else None
            answer = self._done(received, pool, "the job expired before it started")
            return MessageAnswer(answer.then, reason=answer.reason, status=status)
        except RetryNotDue as early:
            # An early duplicate of a retry's message: bring it back when the retry is due.
            self.hooks.claim_not_made(message)
            due = int(early.details.get("retry_at", now)) - int(now)
            return self._hide(received, pool, max(1, due), "retry not due yet")
        except IllegalTransition as refused:
            return self._claim_refused(received, pool, message, owner, worker, refused.seen)
        except Exception as exc:
            return MessageAnswer(Then.LEAVE, reason=f"claim failed: {headline(exc)}")
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
            ending = self._ending_without_run(job, error, retry_allowed=False)
            done = self.finish(job, ending, worker)
            return MessageAnswer(
                done.then,
                reason="max_attempts spent",
                status=done.status,
                # A session's one attempt: its worker stopped, and its page with it.
                session_lost=job.request.session is not None,
            )
        if reclaimed_at_limit(job):
            return self._dead_worker_limit(received, pool, job, worker)
        reason = ""
        if job.error == lost_lease_error(job.attempt - 1):
            # Taken back, or claimed here from the lease it lost: the worker's log says so.
            reason = f"the worker of attempt {job.attempt - 1} stopped (its lease ran out)"
        reserved = events if job.events_seq is not None else 0
        return self._claimed(received, pool, job, worker, reason, events_reserved=reserved)

    def _dead_worker_limit(
        self, received: ReceivedMessage, pool: str, job: JobRecord, worker: str
    ) -> MessageAnswer:
        """A job claimed from its ``LEASES_LOST_LIMIT``-th stopped worker does not run, as
        its take-back would have decided: dead-lettered, or in review when an irreversible
        step is at stake (one that may not run again without a look ends as it would)."""
        self._done(received, pool, "")
        plan = resume_plan(job)
        if plan.resume in (Resume.REVIEW, Resume.COMPENSATED):
            return self._unless_at_stake(job, worker, "")
        if plan.resume is Resume.START:
            ending = Outcome(JobStatus.DEAD_LETTERED, result=job.result, error=dead_worker_error())
        else:  # a step to check: a person looks, not a blind redrive (in review)
            ending = self._ending_without_run(job, dead_worker_error(), retry_allowed=False)
        done = self.finish(job, ending, worker)
        reason = (
            f"its workers stopped {job.leases_lost} times (this claim took the last one's "
            "lease): not run again"
        )
        return MessageAnswer(done.then, reason=reason, status=done.status)

    def _claimed(
        self,
        received: ReceivedMessage,
        pool: str,
        job: JobRecord,
        worker: str,
        reason: str = "",
        *,
        events_reserved: int = 0,
    ) -> MessageAnswer:
        """The claim is written: the message is done with (a failed delete brings it back
        as a copy of a running job, deleted then)."""
        self.hooks.after_claim(job)
        if self.later is not None:
            with contextlib.suppress(RuntimeError):  # stopping (executor shut down): now
                self.later(self._done, received, pool, reason)
                return self._unless_at_stake(job, worker, reason, events_reserved)
        self._done(received, pool, reason)
        return self._unless_at_stake(job, worker, reason, events_reserved)

    def _unless_at_stake(
        self, job: JobRecord, worker: str, reason: str, events_reserved: int = 0
    ) -> MessageAnswer:
        """Run the claimed job, unless an earlier attempt stopped after an irreversible
        step that is not to be run again blindly: then it ends (in review, or failed when
        it was compensated)."""
        plan = resume_plan(job)
        if plan.resume in (Resume.REVIEW, Resume.COMPENSATED):
            ending = self._ending_without_run(job, None, retry_allowed=False)
            done = self.finish(job, ending, worker)
            return MessageAnswer(
                done.then, reason=f"irreversible step: {plan.resume}", status=done.status
            )
        return MessageAnswer(Then.RUN, job=job, reason=reason, events_reserved=events_reserved)

    def _ending_without_run(
        self, job: JobRecord, cause: JobError | None, *, retry_allowed: bool
    ) -> Outcome:
        """How a claimed job ends without running: failed (``cause``), compensated, or in
        review when an irreversible step of an earlier attempt is at stake."""
        target = after_lost_run(job, retry_allowed=retry_allowed)
        if target is JobStatus.NEEDS_REVIEW:
            plan = resume_plan(job)
            return Outcome(
                JobStatus.NEEDS_REVIEW,
                result=job.result,
                error=review_error(job, plan, cause),
                checkpoints=for_review(job.checkpoints),
            )
        if target is JobStatus.FAILED and cause is None:
            reason = job.compensation.reason if job.compensation else "the job failed"
            cause = JobError(kind="compensated", message=f"{reason} (it was compensated)")
        assert cause is not None
        return Outcome(JobStatus.FAILED, result=job.result, error=cause)

    def _claim_refused(
        self,
        received: ReceivedMessage,
        pool: str,
        message: JobMessage,
        owner: str,
        worker: str,
        seen: JobRecord | None = None,
    ) -> MessageAnswer:
        try:
            # As the refused claim saw it (no second read), or read now.
            current = seen or self.store.get(message.tenant_id, message.job_id)
        except NotFound:
            self.hooks.claim_not_made(message)
            return self._done(received, pool, "job not found")
        except Exception as exc:
            return MessageAnswer(Then.LEAVE, reason=f"reading the job failed: {headline(exc)}")
        if current.status is JobStatus.RUNNING and current.lease_owner == owner:
            return self._claimed(
                received, pool, current, worker, "claim applied though its reply was lost"
            )
        if current.status is not JobStatus.RUNNING:
            self.hooks.claim_not_made(message)
        if current.status.is_final:
            return self._done(received, pool, f"duplicate delivery ({current.status.value})")
        if current.status is JobStatus.WAITING_FOR_HUMAN:
            # Its worker holds it while a person answers, and resumes it itself.
            return self._done(received, pool, "a copy of a job waiting for a person")
        if current.status is JobStatus.RUNNING:
            # Another attempt holds a live lease; if its worker dies, the lease is taken back
            # and the job sent again. This copy asks for nothing more.
            return self._done(received, pool, "a copy of a job running elsewhere")
        if current.status is JobStatus.WAITING:
            # Its release sends a message of its own: this one is a stray copy.
            return self._done(received, pool, "the job waits for its parents")
        return MessageAnswer(Then.LEAVE, reason=f"cannot start a {current.status.value} job now")

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

    def run_signals(self, job: JobRecord) -> RunSignals:
        """The cancel flag and the job's watchers, read every second while it runs."""
        return self.store.run_signals(job.tenant_id, job.job_id, now=int(self.clock.now()))

    def record_progress(
        self,
        job: JobRecord,
        checkpoints: list[Checkpoint],
        *,
        result: dict[str, Any] | None = None,
        compensation: Compensation | None = None,
        renew_lease_s: int | None = None,
    ) -> JobRecord:
        """Write the attempt's checkpoints (and its results so far, when they fit in the
        record) before an irreversible step starts and when it ends. Raises ``LeaseLost``:
        then another attempt owns the job, or (``renew_lease_s``: the write before a step
        acts, which renews the lease for that long) its lease has ended, and the step must
        not run."""
        fits = result is not None and json_bytes(result) <= INLINE_RESULT_MAX_BYTES
        renewal = None
        if renew_lease_s is not None:
            renewal = LeaseRenewal.at(self.clock.now(), renew_lease_s)
        return self.store.record_progress(
            job.tenant_id,
            job.job_id,
            attempt=job.attempt,
            owner=job.lease_owner or "",
            checkpoints=checkpoints,
            result=result if fits else None,
            compensation=compensation,
            renewal=renewal,
        )

    def after_failure(
        self,
        job: JobRecord,
        error: JobError,
        *,
        result: dict[str, Any] | None = None,
        artifacts: list[Artifact] | None = None,
        checkpoints: list[Checkpoint] | None = None,
    ) -> Outcome:
        """Retry, fail or review: the one place that applies the attempt budget to a
        failure, and the rules for irreversible steps (``checkpoints``: the attempt's)."""
        kept = job.checkpoints if checkpoints is None else checkpoints
        retry = attempt_allowed(job, job.attempt + 1)
        outcome = Outcome(
            JobStatus.FAILED,
            result=result or None,
            error=error,
            artifacts=list(artifacts or []),
            checkpoints=checkpoints,
        )
        target = after_failed_attempt(job, kept, error, retry_allowed=retry)
        if target is None:
            target = JobStatus.RETRY_SCHEDULED if error.retryable and retry else JobStatus.FAILED
        if target is JobStatus.RETRY_SCHEDULED:
            delay = job.request.retry.delay_seconds(job.attempts_used)
            return replace(outcome, status=target, retry_delay_s=delay)
        if target is JobStatus.NEEDS_REVIEW:
            plan = resume_plan(job, kept)
            error = review_error(job, plan, error)
            return replace(outcome, status=target, error=error, checkpoints=for_review(kept))
        return outcome

    def compensated(self, job: JobRecord, outcome: Outcome, compensation: Compensation) -> Outcome:
        """A failed outcome after the job's compensate steps ran: failed with the
        compensation beside its checkpoints, or in review when the compensation failed."""
        outcome = replace(outcome, compensation=compensation)
        if compensation.state != "done":
            plan = resume_plan(job.model_copy(update={"compensation": compensation}))
            error = review_error(job, plan, outcome.error)
            return replace(outcome, status=JobStatus.NEEDS_REVIEW, error=error)
        return outcome

    def finish(self, job: JobRecord, outcome: Outcome, worker: str) -> MessageAnswer:
        """Write the attempt's outcome (fenced) and send a retry's message.

        The claim deleted the job's message: an outcome not written leaves the job running
        until its lease runs out and it is taken back.
        """
        # One reading of the clock: the expiry is exactly the retention after finished_at,
        # however long the retention's lookup below takes.
        ended, at = self.instant()
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
                retry_at=ended + delay if retrying else None,
                result_artifact=bounded.result_artifact,
                result_bytes=bounded.result_bytes,
                attempt_log=bounded.attempt_log,
                expires_at=ended + keep_s if keep_s is not None else None,
                checkpoints=outcome.checkpoints,
                compensation=outcome.compensation,
                changes=bounded.changes,
            )
        except (LeaseLost, IllegalTransition) as exc:
            if not self._landed(job, outcome):
                return MessageAnswer(Then.LEAVE, reason=f"outcome not written: {exc.message}")
        except Exception as exc:
            return MessageAnswer(Then.LEAVE, reason=f"writing the outcome failed: {headline(exc)}")
        self.hooks.after_move(job.model_copy(update={"status": outcome.status}))
        if retrying:
            try:
                # Handed back by a stopping worker: at once, ahead of the queue.
                self.send(job, delay_s=delay, ahead=outcome.release_message)
            except Exception as exc:
                # The sweeper re-sends a retry whose message is overdue (RETRY_GRACE_S).
                return MessageAnswer(
                    Then.DELETE,
                    status=outcome.status,
                    reason=f"could not enqueue the retry: {headline(exc)}; the sweeper will",
                )
        return MessageAnswer(Then.DELETE, status=outcome.status)

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

    def defer(
        self, received: ReceivedMessage, pool: str, *, reason: str, delay_s: int
    ) -> MessageAnswer:
        """The job must wait (e.g. its target's circuit is open) without spending an attempt.

        The message is re-sent with a delay (and the received one deleted) rather than
        hidden, so waiting never counts toward the dead-letter queue's receive limit.
        """
        message = job_message(received)
        delay = max(1, min(MAX_DELAY_S, delay_s))
        again = message.model_copy(update={"deferrals": message.deferrals + 1})  # backs off
        try:
            successor = self.queue.send(again, delay_seconds=delay)
        except Exception as exc:
            return MessageAnswer(Then.LEAVE, reason=f"could not defer the job: {headline(exc)}")
        # The reason is a courtesy to the user; the successor, named only now that it is
        # sent, lets the job's other messages be dropped while it waits (``peek``).
        with contextlib.suppress(Exception):
            self.store.defer(
                message.tenant_id,
                message.job_id,
                reason=reason,
                at=self.at(),
                successor=successor,
                due=int(self.clock.now()) + delay,
            )
        return self._done(received, pool, reason)
