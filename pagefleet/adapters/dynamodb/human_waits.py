"""The job store's writes for a job that waits for a person (pagefleet.jobs.human): the
worker parks it and resumes it (fenced on its attempt), the owner continues it
(conditioned on the wait it answers)."""

from __future__ import annotations

from typing import Any

from pagefleet.adapters.dynamodb.codec import status_pk, to_json
from pagefleet.adapters.dynamodb.updates import FENCE, Update
from pagefleet.errors import IllegalTransition, LeaseLost
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

_WAITING = JobStatus.WAITING_FOR_HUMAN
# The worker's fence while the job waits: its attempt, in waiting_for_human.
WAITING_FENCE = "#status = :waiting AND attempt = :attempt AND lease_owner = :owner"


class HumanWaitWrites:
    """Mixed into the DynamoDB job store (it has ``_update``)."""

    _update: Any

    def park(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, wait: HumanWait, at: str
    ) -> JobRecord:
        """running -> waiting_for_human, by the worker holding the attempt."""
        update = Update(
            "SET #status = :to, status_pk = :sp, human = :human, updated_at = :at",
            FENCE,
            {"#status": "status"},
            {
                ":to": _WAITING.value,
                ":sp": status_pk(tenant_id, _WAITING),
                ":human": to_json(wait.model_dump(mode="json")),
                ":at": at,
                ":attempt": attempt,
                ":owner": owner,
                ":running": JobStatus.RUNNING.value,
            },
        )
        return self._update(tenant_id, job_id, update, on_refused=_lost(job_id, attempt))

    def resume(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, at: str
    ) -> JobRecord:
        """waiting_for_human -> running, by the worker holding the attempt (the person
        continued it, or its wait timed out and it ends from running)."""
        update = Update(
            "SET #status = :to, status_pk = :sp, updated_at = :at",
            WAITING_FENCE,
            {"#status": "status"},
            {
                ":to": JobStatus.RUNNING.value,
                ":sp": status_pk(tenant_id, JobStatus.RUNNING),
                ":at": at,
                ":attempt": attempt,
                ":owner": owner,
                ":waiting": _WAITING.value,
            },
        )
        return self._update(tenant_id, job_id, update, on_refused=_lost(job_id, attempt))

    def answer_wait(
        self, tenant_id: str, job_id: str, *, asked: HumanWait, answered: HumanWait, at: str
    ) -> JobRecord:
        """The owner's answer to the wait ``asked`` (the record's, as read): only while the
        job still waits with that very question."""
        update = Update(
            "SET human = :answered, updated_at = :at",
            "#status = :waiting AND human = :asked",
            {"#status": "status"},
            {
                ":answered": to_json(answered.model_dump(mode="json")),
                ":asked": to_json(asked.model_dump(mode="json")),
                ":at": at,
                ":waiting": _WAITING.value,
            },
        )

        def refused(current: JobRecord) -> Exception:
            return IllegalTransition(
                f"job {job_id} is {current.status.value}; only a job waiting_for_human can "
                "be continued",
                status=current.status.value,
            )

        return self._update(tenant_id, job_id, update, on_refused=refused)


def _lost(job_id: str, attempt: int) -> Any:
    def refused(current: JobRecord) -> Exception:
        return LeaseLost(
            f"job {job_id} attempt {attempt} no longer holds the job",
            attempt=current.attempt,
            status=current.status.value,
        )

    return refused
