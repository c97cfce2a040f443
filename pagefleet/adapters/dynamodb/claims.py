"""The job store's claim: a new attempt of a job, in one conditional write.

A running job whose lease ran out (its worker stopped) is claimed with what its take-back
would have written, one more lost lease and the error ``lease_expired``. DynamoDB cannot
branch inside one update, so that is a second write, sent only when the plain claim was
refused and the record it saw (returned with the refusal) shows the lease over: the common
claim stays one request.
"""

from __future__ import annotations

from typing import Any

from pagefleet.adapters.dynamodb.codec import status_pk
from pagefleet.adapters.dynamodb.updates import (
    Update,
    claim_update,
    claim_values,
    reclaim_update,
)
from pagefleet.errors import IllegalTransition
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import claim_refusal, lease_over
from pagefleet.jobs.states import JobStatus


class _LeaseOver(IllegalTransition):
    """The plain claim's refusal of a running job whose lease is over (never raised out)."""

    def __init__(self, current: JobRecord) -> None:
        super().__init__(f"job {current.job_id} is running under a lease that is over")
        self.current = current


class ClaimWrites:
    """Mixed into ``DynamoJobStore``, whose ``_update`` sends an update and names a refusal
    from the record the refused write saw."""

    def _update(self, tenant_id: str, job_id: str, update: Update, *, on_refused: Any) -> JobRecord:
        raise NotImplementedError

    def claim(
        self,
        tenant_id: str,
        job_id: str,
        *,
        owner: str,
        lease_until: int,
        now: int,
        started_at: str,
    ) -> JobRecord:
        """Take the job for a new attempt.

        Allowed from queued, retry_scheduled or scheduled before the job's deadline (latest
        start), or from running when the lease has expired (then counting the lost lease).
        """
        claim = claim_values(
            job_id,
            status_key=status_pk(tenant_id, JobStatus.RUNNING),
            owner=owner,
            lease_until=lease_until,
            now=now,
            started_at=started_at,
        )

        def refused(current: JobRecord) -> IllegalTransition:
            if lease_over(current, now):
                return _LeaseOver(current)
            return claim_refusal(current, now)

        try:
            return self._update(tenant_id, job_id, claim_update(claim), on_refused=refused)
        except _LeaseOver as over:
            seen = over.current.attempt
        # Refused in turn when another claim took it first, or a take-back moved it.
        return self._update(
            tenant_id,
            job_id,
            reclaim_update(claim, attempt=seen),
            on_refused=lambda current: claim_refusal(current, now),
        )
