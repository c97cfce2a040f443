"""Dispatch moves: a scheduled job sent on its way when its start comes within reach, a
waiting job released when every parent succeeded or cancelled when one did not."""

from __future__ import annotations

from pagefleet.errors import IllegalTransition, NotFound
from pagefleet.jobs.lifecycle.base import LifecycleBase
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.states import JobStatus


class DispatchMoves(LifecycleBase):
    def dispatch_due(self, tenant_id: str, job_id: str) -> bool:
        """A scheduled job less than 15 minutes from its start: send its message delayed to
        that start. True if this call sent it."""
        job = self.job_in(tenant_id, job_id, JobStatus.SCHEDULED)
        if job is None:
            return False
        if job.deadline_at is not None and job.deadline_at < self.now():
            self.expire(tenant_id, job_id)  # it can no longer start in time
            return False
        self.send(job, delay_s=max(0, (job.run_at or 0) - self.now()))
        self.store.dispatched(tenant_id, job_id, at=self.at())
        return True

    def settle_waiting(self, tenant_id: str, job_id: str) -> JobStatus | None:
        """Release a waiting job whose parents all succeeded (queued), cancel one with a
        parent that ended otherwise (cancelled, naming that parent and how it ended).

        Returns the state this call moved the job to; None when it still waits or someone
        else moved it first. Safe to run twice at once: each move is conditional.
        """
        job = self.job_in(tenant_id, job_id, JobStatus.WAITING)
        if job is None:
            return None
        if job.deadline_at is not None and job.deadline_at < self.now():
            return JobStatus.EXPIRED if self.expire(tenant_id, job_id) else None
        pending = False
        for parent_id in job.request.depends_on:
            try:
                parent = self.store.get(tenant_id, parent_id)
            except NotFound:
                return self._cancel_child(job, parent_id, "no longer exists")
            if parent.status is JobStatus.SUCCEEDED:
                continue
            if parent.status.is_final:
                return self._cancel_child(job, parent_id, f"ended {parent.status.value}")
            pending = True  # running, queued... or dead-lettered (it may be redriven)
        if pending:
            return None
        try:
            # Not a move the hooks hear of: waiting and queued both count as not started.
            released = self.store.transition(tenant_id, job_id, JobStatus.QUEUED, at=self.at())
        except IllegalTransition:
            return None
        self.enqueue(released)
        return JobStatus.QUEUED

    def release_dependants(self, parent: JobRecord) -> int:
        """A job reached a final state: settle each job that waits for it."""
        moved = 0
        for child_id in self.store.dependants(parent.tenant_id, parent.job_id):
            moved += self.settle_waiting(parent.tenant_id, child_id) is not None
        return moved

    def _cancel_child(self, job: JobRecord, parent_id: str, how: str) -> JobStatus | None:
        error = JobError(
            kind="dependency_failed",
            message=f"job {parent_id}, which this job depends on, {how}; it will not run",
        )
        try:
            self._transition(job.tenant_id, job.job_id, JobStatus.CANCELLED, error=error)
        except IllegalTransition:
            return None
        return JobStatus.CANCELLED
