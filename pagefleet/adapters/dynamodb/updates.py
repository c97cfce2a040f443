"""The conditional update expressions of the job store's status moves.

Built here as plain values (expression, condition, names, values) so the store only sends
them; every condition comes from the transition table or the worker's fence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pagefleet.adapters.dynamodb.codec import UNQUEUED, epoch_of, ops_key, ops_time, to_json
from pagefleet.jobs.models import Artifact, AttemptRecord, JobError
from pagefleet.jobs.rules import RETRY_DUE_SLACK_S
from pagefleet.jobs.states import JobStatus, sources_of

# A worker's write is valid only while it still holds the attempt it claimed.
FENCE = "#status = :running AND attempt = :attempt AND lease_owner = :owner"


@dataclass(frozen=True)
class Update:
    expression: str
    condition: str
    names: dict[str, str]
    values: dict[str, Any]


def status_in(states: frozenset[JobStatus]) -> tuple[dict[str, str], dict[str, Any], str]:
    ordered = sorted(s.value for s in states)
    values = {f":from{i}": s for i, s in enumerate(ordered)}
    clause = f"#status IN ({', '.join(values)})"
    return {"#status": "status"}, values, clause


def _expression(sets: list[str], removes: list[str]) -> str:
    return "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")


def claim_update(
    job_id: str, *, status_key: str, owner: str, lease_until: int, now: int, started_at: str
) -> Update:
    """A new attempt: from queued or retry_scheduled, or from running when the lease has
    expired, and only before the job's deadline (latest start)."""
    sources = sources_of(JobStatus.RUNNING) - {JobStatus.RUNNING}
    names, values, in_clause = status_in(sources)
    values.update(
        {
            ":running": JobStatus.RUNNING.value,
            ":now": now,
            ":one": 1,
            ":owner": owner,
            ":until": lease_until,
            ":started": started_at,
            ":sp": status_key,
            ":ops": ops_key("lease", job_id),
            ":ops_sk": ops_time(lease_until),
            ":retry": JobStatus.RETRY_SCHEDULED.value,
            ":scheduled": JobStatus.SCHEDULED.value,
            ":due": now + RETRY_DUE_SLACK_S,
        }
    )
    condition = (
        f"attribute_exists(pk) AND ({in_clause} OR "
        "(#status = :running AND lease_expires_at < :now)) AND "
        "(attribute_not_exists(deadline_at) OR deadline_at >= :now OR #status = :running) AND "
        # A duplicate of a retry's message must not start the attempt before its backoff,
        # nor a scheduled job before its start.
        "(#status <> :retry OR attribute_not_exists(retry_at) OR retry_at <= :due) AND "
        "(#status <> :scheduled OR attribute_not_exists(run_at) OR run_at <= :due)"
    )
    expression = (
        "SET #status = :running, status_pk = :sp, attempt = attempt + :one, "
        "lease_owner = :owner, lease_expires_at = :until, started_at = :started, "
        "updated_at = :started, ops_pk = :ops, ops_sk = :ops_sk "
        "REMOVE deferred_reason, retry_at"
    )
    return Update(expression, condition, names, values)


def finish_update(
    job_id: str,
    *,
    status_key: str,
    attempt: int,
    owner: str,
    status: JobStatus,
    at: str,
    result: dict[str, Any] | None,
    result_artifact: str | None,
    result_bytes: int | None,
    artifacts: list[Artifact],
    error: JobError | None,
    history: AttemptRecord,
    attempt_log: list[AttemptRecord] | None,
    retry_at: int | None,
    expires_at: int | None,
    changes: dict[str, Any] | None = None,
) -> Update:
    """An attempt's outcome, fenced on (attempt, owner)."""
    values: dict[str, Any] = {
        ":to": status.value,
        ":sp": status_key,
        ":at": at,
        ":artifacts": to_json([a.model_dump(mode="json") for a in artifacts]),
        ":attempt": attempt,
        ":owner": owner,
        ":running": JobStatus.RUNNING.value,
    }
    sets = ["#status = :to", "status_pk = :sp", "updated_at = :at", "#artifacts = :artifacts"]
    if attempt_log is None:
        sets.append("attempt_log = list_append(if_not_exists(attempt_log, :empty), :hist)")
        values[":empty"] = []
        values[":hist"] = [to_json(history.model_dump(mode="json"))]
    else:  # the log is at its bound: store it whole, oldest entries dropped
        sets.append("attempt_log = :log")
        values[":log"] = [to_json(a.model_dump(mode="json")) for a in attempt_log]
    removes = ["lease_owner", "lease_expires_at"]
    # RESULT and others are DynamoDB reserved words: always go through names.
    names = {"#status": "status", "#artifacts": "artifacts"}
    if status.is_final:
        sets.append("finished_at = :at")
        removes += ["ops_pk", "ops_sk"]
        if expires_at is not None:
            # With the outcome, not in a later write of the retention consumer's.
            sets.append("expires_at = :expires")
            values[":expires"] = expires_at
    elif status is JobStatus.RETRY_SCHEDULED:
        due = retry_at if retry_at is not None else 0
        sets += ["retry_at = :retry_at", "ops_pk = :ops", "ops_sk = :ops_sk"]
        values.update(
            {":retry_at": due, ":ops": ops_key("retry", job_id), ":ops_sk": ops_time(due)}
        )
    optional = {
        "result": to_json(result) if result is not None else None,
        "error": error.model_dump_json() if error else None,
        "result_artifact": result_artifact,
        "result_bytes": result_bytes,
        "changes": to_json(changes) if changes is not None else None,
    }
    for field, value in optional.items():
        names[f"#{field}"] = field
        if value is None:
            removes.append(f"#{field}")
        else:
            sets.append(f"#{field} = :{field}")
            values[f":{field}"] = value
    return Update(_expression(sets, removes), FENCE, names, values)


def transition_update(
    job_id: str,
    target: JobStatus,
    *,
    status_key: str,
    at: str,
    error: JobError | None,
    lease_expired_before: int | None,
    retry_at: int | None,
) -> Update:
    """A move of a job no live worker holds, conditioned on the transition table."""
    names, values, in_clause = status_in(sources_of(target))
    condition = f"attribute_exists(pk) AND {in_clause}"
    adds = ""
    if lease_expired_before is not None:
        condition += " AND #status = :running_now AND lease_expires_at < :expired_before"
        values.update(
            {":running_now": JobStatus.RUNNING.value, ":expired_before": lease_expired_before}
        )
        # A lease taken back: one more time a worker stopped on this job.
        adds = " ADD leases_lost :one"
        values[":one"] = 1
    values.update({":to": target.value, ":sp": status_key, ":at": at})
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
        removes += ["ops_pk", "ops_sk", "enqueued_at", "#error", "retry_at", "leases_lost"]
        names["#error"] = "error"
    if error is not None:
        names["#error"] = "error"
        sets.append("#error = :error")
        values[":error"] = error.model_dump_json()
    return Update(_expression(sets, removes) + adds, condition, names, values)
