"""The API's, the dead-letter queue's and the sweeper's moves: cancel, redrive, dead-letter,
take back a dead worker's job, re-send a lost retry."""

from __future__ import annotations

from pagefleet.errors import (
    IllegalTransition,
    JobNotCancellable,
    NotFound,
)
from pagefleet.jobs.lifecycle.base import LifecycleBase
from pagefleet.jobs.models import JobError, JobRecord
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.rules import (
    LEASES_LOST_LIMIT,
    attempt_allowed,
    dead_worker_limit_reached,
)
from pagefleet.jobs.states import JobStatus


class RecoveryMoves(LifecycleBase):
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
                "the job starting; it was moved to the dead-letter queue"
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

    def take_back(
        self, tenant_id: str, job_id: str, *, expired_before: int, pool: str | None = None
    ) -> str:
        """A running job whose worker stopped heartbeating: retry it at once, ahead of its
        queue; fail it when its attempts are spent; dead-letter it when workers stopped on
        it ``LEASES_LOST_LIMIT`` times. With ``pool``, only that pool's jobs (a worker
        sends only to its own pool's queues). Returns "requeued", "failed",
        "dead_lettered", "alive", "elsewhere" (another pool's), "unsent" (left for the next
        look) or "gone"."""
        try:
            job = self.store.get(tenant_id, job_id)
        except NotFound:
            return "gone"
        if job.status is not JobStatus.RUNNING or (job.lease_expires_at or 0) >= expired_before:
            return "alive"
        if pool is not None and job.pool != pool:
            return "elsewhere"
        error = JobError(
            kind="lease_expired",
            message=f"worker lost its lease on attempt {job.attempt} (it stopped heartbeating)",
            retryable=True,
            timeout="lease",
        )
        retry = attempt_allowed(job, job.attempt + 1)
        to = JobStatus.RETRY_SCHEDULED if retry else JobStatus.FAILED
        if retry and dead_worker_limit_reached(job):
            to = JobStatus.DEAD_LETTERED
            error = JobError(
                kind="dead_lettered",
                message=(
                    f"its worker stopped {LEASES_LOST_LIMIT} times without finishing (the job "
                    "may be what kills it); kept as a dead letter for an operator to redrive"
                ),
                retryable=True,
                timeout="lease",
            )
        if to is JobStatus.RETRY_SCHEDULED:
            # The message first: whoever takes a job back may die next, and a job moved
            # without its message would wait for the sweeper's re-send. Sent for a job that
            # is not taken back after all (a heartbeat came back, another watch won), the
            # copy finds it running or retried and is deleted. It goes to the front: it had
            # waited its turn once, as its old message did when it came back.
            try:
                self.send(job, ahead=True)
            except Exception:
                return "unsent"  # still running, its lease over: the next look tries again
        try:
            moved = self.store.transition(
                tenant_id,
                job_id,
                to,
                at=self.at(),
                error=error,
                lease_expired_before=expired_before,
                retry_at=self.now(),
            )
        except IllegalTransition:
            return "alive"  # the heartbeat came back, or someone else took it back first
        if to is JobStatus.RETRY_SCHEDULED:
            # Its tenant's running slot stays the job's: it starts again at once and its
            # claim finds the slot its own (a reclaim from the returning message kept it
            # too), instead of being deferred behind a tenant at its cap.
            return "requeued"
        self.hooks.after_move(moved)
        return to.value

    def resend_retry(self, tenant_id: str, job_id: str, *, look_again_at: int) -> bool:
        """A retry whose message never came back (its send failed): send it again, ahead of
        its queue, since it has waited its turn and more."""
        job = self.job_in(tenant_id, job_id, JobStatus.RETRY_SCHEDULED)
        if job is None:
            return False
        self.send(job, ahead=True)
        self.store.postpone_retry(tenant_id, job_id, due=look_again_at)
        return True
