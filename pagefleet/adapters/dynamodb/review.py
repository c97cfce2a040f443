"""The job store's writes for irreversible steps: an attempt's checkpoints (fenced), and a
person's resolution of a job in review (conditioned on the review).

docs/irreversible-steps.md says what they mean; ``pagefleet.jobs.rules`` decides on them.
"""

from __future__ import annotations

from typing import Any

from pagefleet.adapters.dynamodb.codec import UNQUEUED, ops_time, status_pk, to_json
from pagefleet.adapters.dynamodb.updates import (
    FENCE,
    Update,
    set_irreversible,
    update_expression,
)
from pagefleet.errors import IllegalTransition, LeaseLost
from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import LeaseRenewal
from pagefleet.jobs.states import JobStatus


def progress_update(
    *,
    attempt: int,
    owner: str,
    checkpoints: list[Checkpoint],
    result: dict[str, Any] | None,
    compensation: Compensation | None,
    renewal: LeaseRenewal | None = None,
) -> Update:
    """An attempt's word on its irreversible steps, and its results so far, fenced on
    (attempt, owner): written before such a step starts and when it ends. With ``renewal``
    (before a step acts) the lease must not have ended, and is pushed out in the same write
    (as a heartbeat: its end and the lease index's sort key)."""
    values: dict[str, Any] = {
        ":attempt": attempt,
        ":owner": owner,
        ":running": JobStatus.RUNNING.value,
    }
    names = {"#status": "status"}
    sets: list[str] = []
    set_irreversible(sets, values, checkpoints=checkpoints, compensation=compensation)
    if result is not None:
        names["#result"] = "result"
        sets.append("#result = :result")
        values[":result"] = to_json(result)
    condition = FENCE
    if renewal is not None:
        sets += ["lease_expires_at = :until", "ops_sk = :ops_sk"]
        values.update(
            {":until": renewal.until, ":ops_sk": ops_time(renewal.until), ":now": renewal.now}
        )
        condition += " AND lease_expires_at > :now"
    return Update(update_expression(sets, []), condition, names, values)


def resolve_update(
    target: JobStatus,
    *,
    status_key: str,
    at: str,
    checkpoints: list[Checkpoint],
    resolution: Resolution,
) -> Update:
    """A person's resolution of a job in review: succeeded, or queued to run again (with a
    fresh attempt budget, its message still to send). Only from needs_review."""
    names = {"#status": "status", "#error": "error"}
    values: dict[str, Any] = {
        ":review": JobStatus.NEEDS_REVIEW.value,
        ":to": target.value,
        ":sp": status_key,
        ":at": at,
    }
    sets = ["#status = :to", "status_pk = :sp", "updated_at = :at"]
    removes = ["#error", "ops_pk", "ops_sk", "lease_owner", "lease_expires_at", "retry_at"]
    if target.is_final:
        sets.append("finished_at = :at")
    else:  # queued: as a redrive, its workers' stops forgotten with its attempts
        sets += ["attempt_base = attempt", "unqueued_pk = :unq"]
        values[":unq"] = UNQUEUED
        removes += ["enqueued_at", "leases_lost"]
    set_irreversible(sets, values, checkpoints=checkpoints, resolution=resolution)
    condition = "attribute_exists(pk) AND #status = :review"
    return Update(update_expression(sets, removes), condition, names, values)


class ReviewWrites:
    """Mixed into ``DynamoJobStore``, whose ``_update`` sends an update and names a refusal."""

    def _update(self, tenant_id: str, job_id: str, update: Update, *, on_refused: Any) -> JobRecord:
        raise NotImplementedError

    def record_progress(
        self,
        tenant_id: str,
        job_id: str,
        *,
        attempt: int,
        owner: str,
        checkpoints: list[Checkpoint],
        result: dict[str, Any] | None = None,
        compensation: Compensation | None = None,
        renewal: LeaseRenewal | None = None,
    ) -> JobRecord:
        """The attempt's checkpoints (and results so far, compensation), fenced on
        (attempt, owner): raises ``LeaseLost`` when another attempt owns the job, or (with
        ``renewal``) when its lease has ended."""
        update = progress_update(
            attempt=attempt,
            owner=owner,
            checkpoints=checkpoints,
            result=result,
            compensation=compensation,
            renewal=renewal,
        )
        return self._update(
            tenant_id,
            job_id,
            update,
            on_refused=lambda current: LeaseLost(
                f"job {job_id} attempt {attempt}: its lease has ended"
                if (current.attempt, current.lease_owner, current.status)
                == (attempt, owner, JobStatus.RUNNING)
                else f"job {job_id} attempt {attempt} no longer holds the lease",
                attempt=current.attempt,
                status=current.status.value,
            ),
        )

    def resolve_review(
        self,
        tenant_id: str,
        job_id: str,
        *,
        to: JobStatus,
        at: str,
        checkpoints: list[Checkpoint],
        resolution: Resolution,
    ) -> JobRecord:
        """A person's resolution of a job in review: ``succeeded``, or ``queued`` again with
        a fresh attempt budget. Refused (``IllegalTransition``) unless it is in review."""
        update = resolve_update(
            to,
            status_key=status_pk(tenant_id, to),
            at=at,
            checkpoints=checkpoints,
            resolution=resolution,
        )
        return self._update(
            tenant_id,
            job_id,
            update,
            on_refused=lambda current: IllegalTransition(
                f"job {job_id} is {current.status.value}, not needs_review",
                status=current.status.value,
            ),
        )
