"""The moves of a job that waits for a person (an ``await_human`` step; pagefleet.jobs.human):
the worker parks it and resumes it, the owner continues it, the sweeper sends a parked job
whose worker died to review.

Parking gives the tenant's running slot back (the hooks hear of the move) while the worker
keeps the attempt, its lease and its browser context; resuming takes a slot again the way
a claim does, so a tenant at its cap waits for one before the job goes on. A browser
session keeps its slot while it waits (``keep_slot``): it holds its browser for its agent
either way, its slot is how it is listed as open, and it must not wait for a slot to go on.
"""

from __future__ import annotations

from pagefleet.errors import IllegalTransition, JobNotWaiting, LeaseLost
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.lifecycle.base import LifecycleBase
from pagefleet.jobs.record import JobError, JobMessage, JobRecord
from pagefleet.jobs.states import JobStatus

_WAITING = JobStatus.WAITING_FOR_HUMAN


class HumanMoves(LifecycleBase):
    def park(
        self,
        job: JobRecord,
        *,
        prompt: str,
        step_index: int,
        timeout_s: int,
        keep_slot: bool = False,
    ) -> JobRecord:
        """running -> waiting_for_human (raises ``LeaseLost``): the slot goes back, unless
        ``keep_slot`` (a browser session: resume it ``with_slot=False``)."""
        now, at = self.instant()
        wait = HumanWait(
            prompt=prompt, step_index=step_index, asked_at=at, timeout_at=now + timeout_s
        )
        parked = self.store.park(
            job.tenant_id,
            job.job_id,
            attempt=job.attempt,
            owner=job.lease_owner or "",
            wait=wait,
            at=at,
        )
        if not keep_slot:
            self.hooks.after_move(parked)
        return parked

    def resume(self, job: JobRecord, *, with_slot: bool = True) -> JobRecord | None:
        """waiting_for_human -> running (raises ``LeaseLost``); None while the tenant has no
        running slot free (try again). ``with_slot=False``: the wait timed out and the job
        ends at once, so it takes none."""
        if with_slot and self.hooks.before_claim(JobMessage.for_job(job)) is not None:
            return None
        try:
            return self.store.resume(
                job.tenant_id,
                job.job_id,
                attempt=job.attempt,
                owner=job.lease_owner or "",
                at=self.at(),
            )
        except LeaseLost:
            if with_slot:  # the slot just taken is not this attempt's to keep
                self.hooks.after_move(job.model_copy(update={"status": _WAITING}))
            raise

    def continue_waiting(self, tenant_id: str, job_id: str, *, note: str | None) -> JobRecord:
        """The owner is done: the waiting job goes on (its worker resumes it within a
        second or two). Answered again, it is the first answer's job."""
        for _ in range(3):
            job = self.store.get(tenant_id, job_id)
            if job.status is not _WAITING or job.human is None:
                raise JobNotWaiting(
                    f"job {job_id} is {job.status.value}; only a job waiting_for_human can "
                    "be continued",
                    status=job.status.value,
                )
            if job.human.continued_at is not None:
                return job
            answered = job.human.model_copy(update={"continued_at": self.at(), "note": note})
            try:
                return self.store.answer_wait(
                    tenant_id, job_id, asked=job.human, answered=answered, at=self.at()
                )
            except IllegalTransition:
                continue  # it moved or was answered meanwhile: look again
        raise JobNotWaiting(f"job {job_id} kept changing state; retry the continue")

    def lost_while_waiting(self, job: JobRecord, *, expired_before: int) -> JobRecord:
        """A parked job whose worker stopped heartbeating: its browser context (and whatever
        the person did in it) is gone, so a person decides, never a blind retry."""
        prompt = job.human.prompt if job.human is not None else ""
        error = JobError(
            kind="needs_review",
            message=(
                f"its worker stopped while the job waited for a person ({prompt!r}); the "
                "browser context and any work done in it are gone; resolve it: POST "
                "/v1/jobs/{id}/resolve with outcome not_done to run it again from the start, "
                "or done to end it with the results it has"
            ),
            step_index=job.human.step_index if job.human is not None else None,
            timeout="lease",
        )
        return self._transition(
            job.tenant_id,
            job.job_id,
            JobStatus.NEEDS_REVIEW,
            error=error,
            lease_expired_before=expired_before,
        )
