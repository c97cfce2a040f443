"""The API's, the dead-letter queue's and the sweeper's moves: cancel, redrive, resolve a
job in review, dead-letter, take back a dead worker's job, re-send a lost retry."""

from __future__ import annotations

from typing import Literal

from pagefleet.errors import (
    IllegalTransition,
    JobNotCancellable,
    JobNotInReview,
    NotFound,
)
from pagefleet.jobs.checkpoints import Resolution, for_review, pending, restate
from pagefleet.jobs.lifecycle.human import HumanMoves
from pagefleet.jobs.moves import review_error
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.rules import (
    after_lost_run,
    attempt_allowed,
    dead_worker_error,
    dead_worker_limit_reached,
    gone,
    lost_lease_error,
    resume_plan,
)
from pagefleet.jobs.states import HELD_STATES, JobStatus


class RecoveryMoves(HumanMoves):
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

    def resolve(
        self,
        tenant_id: str,
        job_id: str,
        outcome: Literal["done", "not_done"],
        *,
        go_on: bool = False,
        by: str,
    ) -> JobRecord:
        """A person's word on a job in review (docs/irreversible-steps.md).

        ``done``: the irreversible step took effect; the job ends ``succeeded`` with the
        results it has (the steps after it recorded as skipped), or with ``go_on`` runs
        those steps in a new attempt. ``not_done``: it did not; the job runs again from the
        start. Either new run gets a fresh attempt budget. ``JobNotInReview`` (409) names
        the job's state when it is not in review.
        """
        job = self.store.get(tenant_id, job_id)
        if gone(job, self.now()):  # past its retention: its artifacts may be gone already
            raise NotFound(f"job {job_id} not found", job_id=job_id)
        if job.status is not JobStatus.NEEDS_REVIEW:
            raise JobNotInReview(
                f"job {job_id} is {job.status.value}; only a job in needs_review can be resolved",
                status=job.status.value,
            )
        at = self.at()
        at_stake = pending(job.checkpoints)
        checkpoints = job.checkpoints
        skipped: list[int] = []
        target = JobStatus.QUEUED
        if at_stake is not None:
            checkpoints = restate(
                checkpoints,
                at_stake.step,
                "done" if outcome == "done" else "not_done",
                how="resolved",
                at=at,
            )
        if outcome == "done" and not go_on:
            target = JobStatus.SUCCEEDED
            first = at_stake.step + 1 if at_stake is not None else len(job.request.steps)
            skipped = list(range(first, len(job.request.steps)))
        resolution = Resolution(
            outcome=outcome,
            continue_=go_on,
            step=at_stake.step if at_stake else None,
            by=by,
            at=at,
            skipped=skipped,
        )
        try:
            moved = self.store.resolve_review(
                tenant_id, job_id, to=target, at=at, checkpoints=checkpoints, resolution=resolution
            )
        except IllegalTransition as refused:
            raise JobNotInReview(
                f"job {job_id} is {refused.details.get('status')}; only a job in needs_review "
                "can be resolved",
                status=refused.details.get("status"),
            ) from None
        self.hooks.after_move(moved)
        if target is JobStatus.QUEUED:
            return self.enqueue(moved)
        return moved

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
                "the job starting; it was moved to the dead-letter queue"
            ),
            retryable=True,
        )
        # An irreversible step at stake: a person decides, not a blind redrive.
        target = after_lost_run(current, retry_allowed=False) or JobStatus.DEAD_LETTERED
        try:
            self._lost_run_move(current, target, reason)
        except NotFound:
            return "unknown_job"
        except IllegalTransition:
            return "already_final"  # finished (or already dead-lettered) before the DLQ saw it
        return "marked" if target is JobStatus.DEAD_LETTERED else target.value

    def _lost_run_move(
        self,
        job: JobRecord,
        target: JobStatus,
        cause: JobError,
        *,
        lease_expired_before: int | None = None,
        tell_hooks: bool = True,
    ) -> JobRecord:
        """Move a job whose attempt ended without its worker; to review (with why, and its
        unsettled checkpoints marked unknown) when an irreversible step is at stake."""
        error, checkpoints = cause, None
        if target is JobStatus.NEEDS_REVIEW:
            error = review_error(job, resume_plan(job), cause)
            checkpoints = for_review(job.checkpoints)
        elif target is JobStatus.FAILED and job.compensation is not None:
            error = JobError(
                kind="compensated", message=f"{job.compensation.reason} (it was compensated)"
            )
        move = self._transition if tell_hooks else self._transition_unheard
        return move(
            job.tenant_id,
            job.job_id,
            target,
            error=error,
            lease_expired_before=lease_expired_before,
            retry_at=self.now(),
            checkpoints=checkpoints,
        )

    def take_back(
        self, tenant_id: str, job_id: str, *, expired_before: int, pool: str | None = None
    ) -> str:
        """A running job whose worker stopped heartbeating: retry it at once, ahead of its
        queue; fail it when its attempts are spent; dead-letter it when workers stopped on
        it ``LEASES_LOST_LIMIT`` times; put it in review when an irreversible step it
        started cannot be checked. With ``pool``, only that pool's jobs (a worker sends
        only to its own pool's queues). Returns "requeued", "failed", "dead_lettered",
        "needs_review", "alive", "elsewhere" (another pool's), "unsent" (left for the next
        look) or "gone"."""
        try:
            job = self.store.get(tenant_id, job_id)
        except NotFound:
            return "gone"
        return self.take_back_job(job, expired_before=expired_before, pool=pool)

    def take_back_job(self, job: JobRecord, *, expired_before: int, pool: str | None = None) -> str:
        """``take_back`` of a job as just read (its caller wants to know what it was)."""
        if job.status not in HELD_STATES or (job.lease_expires_at or 0) >= expired_before:
            return "alive"
        if pool is not None and job.pool != pool:
            return "elsewhere"
        if job.status is JobStatus.WAITING_FOR_HUMAN:
            try:
                self.lost_while_waiting(job, expired_before=expired_before)
            except IllegalTransition:
                return "alive"  # its heartbeat came back, or someone else moved it first
            return JobStatus.NEEDS_REVIEW.value
        error = lost_lease_error(job.attempt)
        retry = attempt_allowed(job, job.attempt + 1)
        to = after_lost_run(job, retry_allowed=retry)
        plain = to is None  # no irreversible step at stake
        if to is None:
            to = JobStatus.RETRY_SCHEDULED if retry else JobStatus.FAILED
        if to is JobStatus.RETRY_SCHEDULED and dead_worker_limit_reached(job):
            # A job whose step is at stake is never redriven from the start: a person looks.
            to = JobStatus.DEAD_LETTERED if plain else JobStatus.NEEDS_REVIEW
            error = dead_worker_error()
        if to is JobStatus.RETRY_SCHEDULED:
            # The message first: whoever takes a job back may die next, and a job moved
            # without its message would wait for the sweeper's re-send. Sent for a job that
            # is not taken back after all (a heartbeat came back, another watch won), the
            # copy finds it running or retried and is deleted; claimed before the move below
            # (its lease is over), the claim counts the lost lease and the move is refused.
            # It goes to the front: it had waited its turn once, as its old message did when
            # it came back.
            try:
                self.send(job, ahead=True)
            except Exception:
                return "unsent"  # still running, its lease over: the next look tries again
        try:
            # A retried job keeps its tenant's running slot (the hooks do not hear of the
            # move): it starts again at once and its claim finds the slot its own, instead
            # of being deferred behind a tenant at its cap.
            self._lost_run_move(
                job,
                to,
                error,
                lease_expired_before=expired_before,
                tell_hooks=to is not JobStatus.RETRY_SCHEDULED,
            )
        except IllegalTransition:
            return "alive"  # the heartbeat came back, or someone else took it back first
        return "requeued" if to is JobStatus.RETRY_SCHEDULED else to.value

    def resend_retry(self, tenant_id: str, job_id: str, *, look_again_at: int) -> bool:
        """A retry whose message never came back (its send failed): send it again, ahead of
        its queue, since it has waited its turn and more."""
        job = self.job_in(tenant_id, job_id, JobStatus.RETRY_SCHEDULED)
        if job is None:
            return False
        self.send(job, ahead=True)
        self.store.postpone_retry(tenant_id, job_id, due=look_again_at)
        return True
