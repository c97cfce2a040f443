"""The DynamoDB job store: job records and idempotency keys in one table, tenant first.

Every write that changes a job's status is a conditional write built from the transition
table; every write by a worker is also fenced on (attempt, lease_owner). A refused write
raises a named error instead of overwriting.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    OPS_SHARDS,
    UNQUEUED,
    deserialize,
    epoch_of,
    idempotency_sk,
    item_to_record,
    job_sk,
    ops_key,
    ops_time,
    record_to_item,
    serialize,
    status_pk,
    tenant_pk,
)
from pagefleet.errors import (
    IdempotencyConflict,
    IllegalTransition,
    LeaseLost,
    NotFound,
)
from pagefleet.jobs.rules import RETRY_DUE_SLACK_S, claim_refusal
from pagefleet.models import Artifact, AttemptRecord, JobError, JobRecord
from pagefleet.ports import IdempotencyRecord
from pagefleet.states import JobStatus, sources_of

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoJobStore:
    """Job records and idempotency keys in one table, keyed by tenant first."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    # --- create / read ----------------------------------------------------------------------
    def create(self, record: JobRecord, idempotency_fingerprint: str | None = None) -> None:
        """Write a new queued job, and its idempotency key in the same transaction.

        Raises ``IdempotencyConflict`` when the key already exists (the caller re-reads it).
        """
        item = record_to_item(record)
        item["unqueued_pk"] = UNQUEUED
        if record.deadline_at is not None:
            item["ops_pk"] = ops_key("deadline", record.job_id)
            item["ops_sk"] = ops_time(record.deadline_at)
        put_job: Any = {
            "TableName": self._table,
            "Item": serialize(item),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        if record.idempotency_key is None:
            # One item: a conditional put is as safe as a transaction at half the write cost
            # (and moto copies the whole table for every transaction).
            self._db.put_item(**put_job)
            return
        idem = {
            "pk": tenant_pk(record.tenant_id),
            "sk": idempotency_sk(record.idempotency_key),
            "job_id": record.job_id,
            "fingerprint": idempotency_fingerprint,
            "created_at": record.created_at,
        }
        put_idem: Any = {
            "Put": {
                "TableName": self._table,
                "Item": serialize(idem),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        try:
            self._db.transact_write_items(TransactItems=[put_idem, {"Put": put_job}])
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "TransactionCanceledException":
                raise IdempotencyConflict(record.idempotency_key) from exc
            raise

    def get_idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": idempotency_sk(key)}),
            ConsistentRead=True,
        )
        if "Item" not in resp:
            return None
        data = deserialize(resp["Item"])
        return IdempotencyRecord(job_id=data["job_id"], fingerprint=data["fingerprint"])

    def get(self, tenant_id: str, job_id: str, *, consistent: bool = True) -> JobRecord:
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
            ConsistentRead=consistent,
        )
        if "Item" not in resp:
            raise NotFound(f"job {job_id} not found", job_id=job_id)
        return item_to_record(resp["Item"])

    def cancel_requested(self, tenant_id: str, job_id: str) -> bool:
        """Cheap read of the cancel flag (the worker polls it every second while running)."""
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
            ProjectionExpression="cancel_requested_at",
        )
        return "cancel_requested_at" in resp.get("Item", {})

    def list_page(
        self,
        tenant_id: str,
        *,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
    ) -> tuple[list[JobRecord], dict[str, Any] | None]:
        """Newest first. With a status, reads the by_status index so pages stay full."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Limit": limit,
            "ScanIndexForward": False,
        }
        if status is None:
            kwargs["KeyConditionExpression"] = "pk = :pk AND begins_with(sk, :job)"
            kwargs["ExpressionAttributeValues"] = serialize(
                {":pk": tenant_pk(tenant_id), ":job": "JOB#"}
            )
        else:
            kwargs["IndexName"] = "by_status"
            kwargs["KeyConditionExpression"] = "status_pk = :sp"
            kwargs["ExpressionAttributeValues"] = serialize({":sp": status_pk(tenant_id, status)})
        if start_key:
            kwargs["ExclusiveStartKey"] = serialize(start_key)
        resp = self._db.query(**kwargs)
        jobs = [item_to_record(item) for item in resp.get("Items", [])]
        last = resp.get("LastEvaluatedKey")
        return jobs, (deserialize(last) if last else None)

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
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise NotFound(f"job {job_id} not found", job_id=job_id) from exc
            raise

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

        Allowed from queued or retry_scheduled, or from running when the lease has expired,
        and only before the job's deadline (latest start).
        """
        sources = sources_of(JobStatus.RUNNING) - {JobStatus.RUNNING}
        names, values, in_clause = _status_in(sources)
        values.update(
            {
                ":running": JobStatus.RUNNING.value,
                ":now": now,
                ":one": 1,
                ":owner": owner,
                ":until": lease_until,
                ":started": started_at,
                ":sp": status_pk(tenant_id, JobStatus.RUNNING),
                ":ops": ops_key("lease", job_id),
                ":ops_sk": ops_time(lease_until),
            }
        )
        values[":retry"] = JobStatus.RETRY_SCHEDULED.value
        values[":due"] = now + RETRY_DUE_SLACK_S
        condition = (
            f"attribute_exists(pk) AND ({in_clause} OR "
            "(#status = :running AND lease_expires_at < :now)) AND "
            "(attribute_not_exists(deadline_at) OR deadline_at >= :now OR #status = :running) AND "
            # A duplicate of a retry's message must not start the attempt before its backoff.
            "(#status <> :retry OR attribute_not_exists(retry_at) OR retry_at <= :due)"
        )

        return self._update(
            tenant_id,
            job_id,
            update=(
                "SET #status = :running, status_pk = :sp, attempt = attempt + :one, "
                "lease_owner = :owner, lease_expires_at = :until, started_at = :started, "
                "updated_at = :started, ops_pk = :ops, ops_sk = :ops_sk "
                "REMOVE deferred_reason, retry_at"
            ),
            condition=condition,
            names=names,
            values=values,
            on_refused=lambda current: claim_refusal(current, now),
        )

    def extend_lease(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, lease_until: int
    ) -> JobRecord:
        """Heartbeat: push the lease out; returns the record (to read the cancel flag)."""
        return self._update(
            tenant_id,
            job_id,
            update="SET lease_expires_at = :until, ops_sk = :ops_sk",
            condition=_FENCE,
            names={"#status": "status"},
            values={
                ":until": lease_until,
                ":ops_sk": ops_time(lease_until),
                ":attempt": attempt,
                ":owner": owner,
                ":running": JobStatus.RUNNING.value,
            },
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
    ) -> JobRecord:
        """Write the attempt's outcome, fenced on (attempt, owner) and the transition table.

        ``retry_at`` (epoch seconds) goes with ``retry_scheduled``: when the re-sent message is
        due, so the sweeper can tell a lost retry from a pending one.
        """
        if JobStatus.RUNNING not in sources_of(status):
            raise IllegalTransition(f"a running job cannot become {status.value}")
        values: dict[str, Any] = {
            ":to": status.value,
            ":sp": status_pk(tenant_id, status),
            ":at": at,
            ":result": json.dumps(result, separators=(",", ":")) if result is not None else None,
            ":artifacts": json.dumps(
                [a.model_dump(mode="json") for a in artifacts], separators=(",", ":")
            ),
            ":error": error.model_dump_json() if error else None,
            ":hist": [json.dumps(history.model_dump(mode="json"), separators=(",", ":"))],
            ":attempt": attempt,
            ":owner": owner,
            ":running": JobStatus.RUNNING.value,
        }
        sets = [
            "#status = :to",
            "status_pk = :sp",
            "updated_at = :at",
            "#artifacts = :artifacts",
            "attempt_log = list_append(if_not_exists(attempt_log, :empty), :hist)",
        ]
        values[":empty"] = []
        removes = ["lease_owner", "lease_expires_at"]
        # RESULT and others are DynamoDB reserved words: always go through names.
        names = {
            "#status": "status",
            "#result": "result",
            "#error": "error",
            "#artifacts": "artifacts",
        }
        if status.is_final:
            sets.append("finished_at = :at")
            removes += ["ops_pk", "ops_sk"]
        elif status is JobStatus.RETRY_SCHEDULED:
            due = retry_at if retry_at is not None else 0
            sets += ["retry_at = :retry_at", "ops_pk = :ops", "ops_sk = :ops_sk"]
            values.update(
                {":retry_at": due, ":ops": ops_key("retry", job_id), ":ops_sk": ops_time(due)}
            )
        for field, token in (("result", ":result"), ("error", ":error")):
            if values[token] is None:
                removes.append(f"#{field}")
                del values[token]
            else:
                sets.append(f"#{field} = {token}")
        return self._update(
            tenant_id,
            job_id,
            update=f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
            condition=_FENCE,
            names=names,
            values=values,
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
    ) -> JobRecord:
        """Move a job not held by a live worker (cancel, expire, dead-letter, redrive).

        With ``lease_expired_before`` the move applies to a running job only if its lease
        ran out before that time (the sweeper taking back a dead worker's job).
        """
        names, values, in_clause = _status_in(sources_of(target))
        condition = f"attribute_exists(pk) AND {in_clause}"
        if lease_expired_before is not None:
            condition += " AND #status = :running_now AND lease_expires_at < :expired_before"
            values.update(
                {":running_now": JobStatus.RUNNING.value, ":expired_before": lease_expired_before}
            )
        values.update({":to": target.value, ":sp": status_pk(tenant_id, target), ":at": at})
        sets = ["#status = :to", "status_pk = :sp", "updated_at = :at"]
        removes: list[str] = []
        if target.is_final:
            sets.append("finished_at = :at")
            removes += ["ops_pk", "ops_sk", "lease_owner", "lease_expires_at", "unqueued_pk"]
        elif target is JobStatus.DEAD_LETTERED:
            sets += ["ops_pk = :ops", "ops_sk = :ops_sk"]
            values.update({":ops": "dead", ":ops_sk": ops_time(epoch_of(at))})
            removes += ["lease_owner", "lease_expires_at", "unqueued_pk"]
        elif target is JobStatus.RETRY_SCHEDULED:
            due = retry_at if retry_at is not None else epoch_of(at)
            sets += ["retry_at = :retry_at", "ops_pk = :ops", "ops_sk = :ops_sk"]
            values.update(
                {":retry_at": due, ":ops": ops_key("retry", job_id), ":ops_sk": ops_time(due)}
            )
            removes += ["lease_owner", "lease_expires_at"]
        elif target is JobStatus.QUEUED:
            # Redrive: a fresh retry budget, and the message must be sent again.
            sets += ["attempt_base = attempt", "unqueued_pk = :unq"]
            values[":unq"] = UNQUEUED
            removes += ["ops_pk", "ops_sk", "enqueued_at", "#error", "retry_at"]
            names["#error"] = "error"
        if error is not None:
            names["#error"] = "error"
            sets.append("#error = :error")
            values[":error"] = error.model_dump_json()
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return self._update(
            tenant_id,
            job_id,
            update=update,
            condition=condition,
            names=names,
            values=values,
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
            update="SET cancel_requested_at = if_not_exists(cancel_requested_at, :at)",
            condition="#status = :running",
            names={"#status": "status"},
            values={":at": at, ":running": JobStatus.RUNNING.value},
            on_refused=lambda current: IllegalTransition(
                f"job {job_id} is {current.status.value}, not running",
                status=current.status.value,
            ),
        )

    def defer(self, tenant_id: str, job_id: str, *, reason: str, at: str) -> None:
        """Note why a queued job waits (it stays queued; its message is delayed)."""
        with contextlib.suppress(ClientError):
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression="SET deferred_reason = :r, updated_at = :at",
                ConditionExpression="#status IN (:q, :r2)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=serialize(
                    {
                        ":r": reason,
                        ":at": at,
                        ":q": JobStatus.QUEUED.value,
                        ":r2": JobStatus.RETRY_SCHEDULED.value,
                    }
                ),
            )

    def postpone_retry(self, tenant_id: str, job_id: str, *, due: int) -> None:
        """After re-sending a lost retry's message, look again only after ``due``."""
        with contextlib.suppress(ClientError):
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression="SET retry_at = :due, ops_sk = :sk",
                ConditionExpression="#status = :r",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=serialize(
                    {":due": due, ":sk": ops_time(due), ":r": JobStatus.RETRY_SCHEDULED.value}
                ),
            )

    def ops_due(self, kind: str, before_epoch: int, limit: int = 100) -> list[tuple[str, str]]:
        """(tenant_id, job_id) of jobs in the ops index of ``kind`` due before a time."""
        out: list[tuple[str, str]] = []
        shards = ["dead"] if kind == "dead" else [f"{kind}#{n}" for n in range(OPS_SHARDS)]
        for shard in shards:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": "ops",
                "KeyConditionExpression": "ops_pk = :p AND ops_sk < :t",
                "ExpressionAttributeValues": serialize({":p": shard, ":t": ops_time(before_epoch)}),
                "Limit": limit,
            }
            resp = self._db.query(**kwargs)
            for item in resp.get("Items", []):
                data = deserialize(item)
                out.append((str(data["tenant_id"]), str(data["job_id"])))
        return out

    # --- helpers ----------------------------------------------------------------------------
    def _update(
        self,
        tenant_id: str,
        job_id: str,
        *,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        on_refused: Any,
    ) -> JobRecord:
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=serialize(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            current = self.get(tenant_id, job_id)  # raises NotFound for a missing job
            raise on_refused(current) from exc
        return item_to_record(resp["Attributes"])


# A worker's write is valid only while it still holds the attempt it claimed.
_FENCE = "#status = :running AND attempt = :attempt AND lease_owner = :owner"


def _status_in(states: frozenset[JobStatus]) -> tuple[dict[str, str], dict[str, Any], str]:
    ordered = sorted(s.value for s in states)
    values = {f":from{i}": s for i, s in enumerate(ordered)}
    clause = f"#status IN ({', '.join(values)})"
    return {"#status": "status"}, values, clause
