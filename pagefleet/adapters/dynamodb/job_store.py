"""The DynamoDB job store: job records and idempotency keys in one table, tenant first.

Every write that changes a job's status is a conditional write built from the transition
table; every write by a worker is also fenced on (attempt, lease_owner). A refused write
raises a named error instead of overwriting.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.claims import ClaimWrites
from pagefleet.adapters.dynamodb.codec import (
    UNQUEUED,
    condition_failed,
    deserialize,
    epoch_of,
    idempotency_sk,
    item_to_record,
    job_sk,
    ops_time,
    put_new,
    read_item,
    record_to_item,
    serialize,
    status_pk,
    stored_as_written,
    tenant_pk,
    update_job_if,
)
from pagefleet.adapters.dynamodb.dispatch import DispatchQueries, edge_puts, placement
from pagefleet.adapters.dynamodb.human_waits import HumanWaitWrites
from pagefleet.adapters.dynamodb.listing import JobListing
from pagefleet.adapters.dynamodb.review import ReviewWrites
from pagefleet.adapters.dynamodb.takeovers import TakeoverWrites
from pagefleet.adapters.dynamodb.transactions import write_together
from pagefleet.adapters.dynamodb.updates import (
    HELD_FENCE,
    Update,
    finish_update,
    transition_update,
)
from pagefleet.adapters.dynamodb.watchers import WatcherWrites
from pagefleet.errors import (
    IdempotencyConflict,
    IllegalTransition,
    LeaseLost,
    NotFound,
)
from pagefleet.jobs.checkpoints import Checkpoint, Compensation
from pagefleet.jobs.models import MAX_REPLAYS_LISTED
from pagefleet.jobs.ports import IdempotencyRecord
from pagefleet.jobs.record import Artifact, AttemptRecord, JobError, JobRecord
from pagefleet.jobs.states import HELD_STATES, JobStatus, sources_of
from pagefleet.tenancy.limits import IDEMPOTENCY_TTL_S

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoJobStore(
    ClaimWrites,
    HumanWaitWrites,
    WatcherWrites,
    TakeoverWrites,
    ReviewWrites,
    DispatchQueries,
    JobListing,
):
    """Job records and idempotency keys in one table, keyed by tenant first."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    # --- create / read ----------------------------------------------------------------------
    def create(
        self,
        record: JobRecord,
        idempotency_fingerprint: str | None = None,
        *,
        dispatch_at: int | None = None,
    ) -> None:
        """Write a new job, with its idempotency key and dependency edges in the same
        transaction (see ``dispatch.placement`` for where it sits in the indexes).

        Raises ``IdempotencyConflict`` when the key already exists (the caller re-reads it).
        """
        item = record_to_item(record)
        item.update(placement(record, dispatch_at))
        put_job: Any = {
            "TableName": self._table,
            "Item": serialize(item),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        edges: Any = edge_puts(self._table, record)
        if edges:
            self.mark_parents(record)
        if record.idempotency_key is None and not edges:
            # One item: a conditional put is as safe as a transaction at half the write cost
            # (and moto copies the whole table for every transaction).
            put_new(self._db, self._table, item)
            return
        if record.idempotency_key is None:
            try:
                write_together(self._db, [{"Put": put_job}, *edges])
            except ClientError as exc:
                # A retry after a lost reply: the first try wrote all of it, job included.
                if not condition_failed(exc) or not stored_as_written(
                    self._db, self._table, put_job["Item"]
                ):
                    raise
            return
        idem = {
            "pk": tenant_pk(record.tenant_id),
            "sk": idempotency_sk(record.idempotency_key),
            "job_id": record.job_id,
            "fingerprint": idempotency_fingerprint,
            "created_at": record.created_at,
            "expires_at": epoch_of(record.created_at) + IDEMPOTENCY_TTL_S,  # DynamoDB's TTL
        }
        put_idem: Any = {
            "Put": {
                "TableName": self._table,
                "Item": serialize(idem),
                # A key past its expiry is free, whether or not TTL has deleted it yet.
                "ConditionExpression": "attribute_not_exists(pk) OR expires_at <= :now",
                "ExpressionAttributeValues": serialize({":now": epoch_of(record.created_at)}),
            }
        }
        try:
            write_together(self._db, [put_idem, {"Put": put_job}, *edges])
        except ClientError as exc:
            if condition_failed(exc):
                raise IdempotencyConflict(record.idempotency_key) from exc
            raise

    def get_idempotency(self, tenant_id: str, key: str, *, now: float) -> IdempotencyRecord | None:
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": idempotency_sk(key)}),
            ConsistentRead=True,
        )
        if "Item" not in resp:
            return None
        data = deserialize(resp["Item"])
        found = IdempotencyRecord(
            job_id=data["job_id"],
            fingerprint=data["fingerprint"],
            expires_at=int(data["expires_at"]),
        )
        return found if found.expires_at > now else None

    def get(self, tenant_id: str, job_id: str, *, consistent: bool = True) -> JobRecord:
        key = serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)})
        item = read_item(self._db, self._table, key, consistent=consistent)
        if item is None:
            raise NotFound(f"job {job_id} not found", job_id=job_id)
        return item_to_record(item)

    def list_unqueued(self, created_before: str, limit: int = 100) -> list[JobRecord]:
        """Jobs whose message is not known to have reached the queue (for the sweeper)."""
        resp = self._db.query(
            TableName=self._table,
            IndexName="unqueued",
            KeyConditionExpression="unqueued_pk = :u AND created_at < :t",
            ExpressionAttributeValues=serialize({":u": UNQUEUED, ":t": created_before}),
            Limit=limit,
        )
        keys = [deserialize(i) for i in resp.get("Items", [])]
        out = []
        for key in keys:
            try:
                out.append(self.get(key["tenant_id"], key["job_id"]))
            except NotFound:
                continue
        return out

    # --- writes -----------------------------------------------------------------------------
    def mark_enqueued(self, tenant_id: str, job_id: str, at: str) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression="SET enqueued_at = :t REMOVE unqueued_pk",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=serialize({":t": at}),
            )
        except ClientError as exc:
            if condition_failed(exc):
                raise NotFound(f"job {job_id} not found", job_id=job_id) from exc
            raise

    def extend_lease(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, lease_until: int
    ) -> JobRecord:
        """Heartbeat: push the lease out; returns the record (to read the cancel flag)."""
        return self._update(
            tenant_id,
            job_id,
            Update(
                "SET lease_expires_at = :until, ops_sk = :ops_sk",
                HELD_FENCE,
                {"#status": "status"},
                {
                    ":until": lease_until,
                    ":ops_sk": ops_time(lease_until),
                    ":attempt": attempt,
                    ":owner": owner,
                    ":running": JobStatus.RUNNING.value,
                    ":waiting": JobStatus.WAITING_FOR_HUMAN.value,
                },
            ),
            on_refused=lambda current: LeaseLost(
                f"job {job_id} attempt {attempt} no longer holds the lease", attempt=current.attempt
            ),
        )

    def finish(
        self,
        tenant_id: str,
        job_id: str,
        *,
        attempt: int,
        owner: str,
        status: JobStatus,
        at: str,
        result: dict[str, Any] | None,
        artifacts: list[Artifact],
        error: JobError | None,
        history: AttemptRecord,
        retry_at: int | None = None,
        result_artifact: str | None = None,
        result_bytes: int | None = None,
        attempt_log: list[AttemptRecord] | None = None,
        expires_at: int | None = None,
        checkpoints: list[Checkpoint] | None = None,
        compensation: Compensation | None = None,
        changes: dict[str, Any] | None = None,
    ) -> JobRecord:
        """Write the attempt's outcome, fenced on (attempt, owner) and the transition table.

        ``retry_at`` (epoch seconds) goes with ``retry_scheduled``: when the re-sent message is
        due, so the sweeper can tell a lost retry from a pending one. ``attempt_log``, when
        given, replaces the whole log (kept bounded) instead of appending ``history``.
        ``expires_at`` (epoch seconds) goes with a final status: the record's TTL attribute.
        """
        if not HELD_STATES & sources_of(status):
            raise IllegalTransition(f"a running job cannot become {status.value}")
        update = finish_update(
            job_id,
            status_key=status_pk(tenant_id, status),
            attempt=attempt,
            owner=owner,
            status=status,
            at=at,
            result=result,
            result_artifact=result_artifact,
            result_bytes=result_bytes,
            artifacts=artifacts,
            error=error,
            history=history,
            attempt_log=attempt_log,
            retry_at=retry_at,
            expires_at=expires_at,
            checkpoints=checkpoints,
            compensation=compensation,
            changes=changes,
        )
        return self._update(
            tenant_id,
            job_id,
            update,
            on_refused=lambda current: LeaseLost(
                f"job {job_id} attempt {attempt} lost its lease before finishing",
                attempt=current.attempt,
                status=current.status.value,
            ),
        )

    def transition(
        self,
        tenant_id: str,
        job_id: str,
        target: JobStatus,
        *,
        at: str,
        error: JobError | None = None,
        lease_expired_before: int | None = None,
        retry_at: int | None = None,
        checkpoints: list[Checkpoint] | None = None,
    ) -> JobRecord:
        """Move a job not held by a live worker (cancel, expire, dead-letter, redrive).

        With ``lease_expired_before`` the move applies to a running job only if its lease
        ran out before that time (the sweeper taking back a dead worker's job).
        """
        update = transition_update(
            job_id,
            target,
            status_key=status_pk(tenant_id, target),
            at=at,
            error=error,
            lease_expired_before=lease_expired_before,
            retry_at=retry_at,
            checkpoints=checkpoints,
        )
        return self._update(
            tenant_id,
            job_id,
            update,
            on_refused=lambda current: IllegalTransition(
                f"job {job_id} is {current.status.value}, cannot become {target.value}",
                status=current.status.value,
            ),
        )

    def request_cancel(self, tenant_id: str, job_id: str, *, at: str) -> JobRecord:
        """Flag a running job; its worker sees the flag within a second and stops it."""
        return self._update(
            tenant_id,
            job_id,
            Update(
                "SET cancel_requested_at = if_not_exists(cancel_requested_at, :at)",
                "#status IN (:running, :waiting)",
                {"#status": "status"},
                {
                    ":at": at,
                    ":running": JobStatus.RUNNING.value,
                    ":waiting": JobStatus.WAITING_FOR_HUMAN.value,
                },
            ),
            on_refused=lambda current: IllegalTransition(
                f"job {job_id} is {current.status.value}, not running",
                status=current.status.value,
            ),
        )

    def note_replay(self, tenant_id: str, job_id: str, replay_id: str) -> None:
        update_job_if(
            self._db,
            self._table,
            tenant_id,
            job_id,
            "SET replays = list_append(if_not_exists(replays, :none), :id)",
            "attribute_exists(#status) AND "
            "(attribute_not_exists(replays) OR size(replays) < :most)",
            {":none": [], ":id": [replay_id], ":most": MAX_REPLAYS_LISTED},
        )

    def defer(
        self,
        tenant_id: str,
        job_id: str,
        *,
        reason: str,
        at: str,
        successor: str | None = None,
        due: int | None = None,
    ) -> None:
        """Note why a queued job waits (it stays queued; its message is delayed)."""
        sets = "deferred_reason = :r, updated_at = :at"
        values: dict[str, Any] = {}
        if successor is not None and due is not None:
            sets += ", deferred_to = :to, deferred_due = :due"
            values = {":to": successor, ":due": due}
        with contextlib.suppress(ClientError):
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression=f"SET {sets}",
                ConditionExpression="#status IN (:q, :r2)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=serialize(
                    {
                        **values,
                        ":r": reason,
                        ":at": at,
                        ":q": JobStatus.QUEUED.value,
                        ":r2": JobStatus.RETRY_SCHEDULED.value,
                    }
                ),
            )

    def postpone_retry(self, tenant_id: str, job_id: str, *, due: int) -> None:
        """After re-sending a lost retry's message, look again only after ``due``. Only the
        sweeper's look moves: the retry stays due (``retry_at``), so the message sent now is
        claimed at once, not refused as early."""
        with contextlib.suppress(ClientError):
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression="SET ops_sk = :sk",
                ConditionExpression="#status = :r",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=serialize(
                    {":sk": ops_time(due), ":r": JobStatus.RETRY_SCHEDULED.value}
                ),
            )

    # --- helpers ----------------------------------------------------------------------------
    def _update(
        self,
        tenant_id: str,
        job_id: str,
        update: Update,
        *,
        on_refused: Any,
    ) -> JobRecord:
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression=update.expression,
                ConditionExpression=update.condition,
                ExpressionAttributeNames=update.names,
                ExpressionAttributeValues=serialize(update.values),
                ReturnValues="ALL_NEW",
                # A refusal names why from the record as the condition saw it: no read after.
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            seen: Any = exc.response.get("Item")
            if not seen:
                raise NotFound(f"job {job_id} not found", job_id=job_id) from exc
            raise on_refused(item_to_record(seen)) from exc
        return item_to_record(resp["Attributes"])
