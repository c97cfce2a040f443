"""The job store's claim: a new attempt of a job, in one conditional write.

A running job whose lease ran out (its worker stopped) is claimed with what its take-back
would have written, one more lost lease and the error ``lease_expired``. DynamoDB cannot
branch inside one update, so that is a second write, sent only when the plain claim was
refused and the record it saw (returned with the refusal) shows the lease over: the common
claim stays one request.

A claim also reserves the attempt's first run-event numbers on the record's counter
(``pagefleet.live.numbers``); ``allocate_events`` reserves more on it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    job_sk,
    serialize,
    status_pk,
    tenant_pk,
)
from pagefleet.adapters.dynamodb.updates import (
    Update,
    claim_update,
    claim_values,
    reclaim_update,
)
from pagefleet.errors import IllegalTransition, NotFound
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

    _db: Any
    _table: str

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
        events: int = 0,
    ) -> JobRecord:
        """Take the job for a new attempt, reserving ``events`` run-event numbers.

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
            return self._update(
                tenant_id, job_id, claim_update(claim, events=events), on_refused=refused
            )
        except _LeaseOver as over:
            seen = over.current.attempt
        # Refused in turn when another claim took it first, or a take-back moved it.
        return self._update(
            tenant_id,
            job_id,
            reclaim_update(claim, attempt=seen, events=events),
            on_refused=lambda current: claim_refusal(current, now),
        )

    def allocate_events(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        """``EventNumbers`` on the record's counter (``expires_at``: the record's own)."""
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression="ADD events_seq :n, events_bounded :b",
                # Never a stub of a deleted job, nor a counter on a record numbered elsewhere.
                ConditionExpression="attribute_exists(events_seq)",
                ExpressionAttributeValues=serialize({":n": count, ":b": bounded}),
                # ALL_NEW: an ADD of 0 leaves an attribute out of UPDATED_NEW.
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if condition_failed(exc):
                raise NotFound(f"job {job_id} has no event counter", job_id=job_id) from exc
            raise
        new = deserialize(resp["Attributes"])
        return int(new["events_seq"]) - count + 1, int(new["events_bounded"])
