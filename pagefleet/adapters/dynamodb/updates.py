"""The conditional update expressions of the job store's status moves.

Built here as plain values (expression, condition, names, values) so the store only sends
them; every condition comes from the transition table or the worker's fence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pagefleet.adapters.dynamodb.codec import UNQUEUED, epoch_of, ops_key, ops_time, to_json
from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.record import Artifact, AttemptRecord, JobError
from pagefleet.jobs.rules import RETRY_DUE_SLACK_S, lost_lease_error
from pagefleet.jobs.states import HELD_STATES, JobStatus, sources_of

# A worker's write is valid only while it still holds the attempt it claimed.
FENCE = "#status = :running AND attempt = :attempt AND lease_owner = :owner"
# Its lease is kept (heartbeats) in every state a worker holds: running, waiting_for_human.
HELD_FENCE = "#status IN (:running, :waiting) AND attempt = :attempt AND lease_owner = :owner"


@dataclass(frozen=True)
class Update:
    expression: str
    condition: str
    names: dict[str, str]
    values: dict[str, Any]


def claimable() -> frozenset[JobStatus]:
    """The states a new attempt claims a job from (besides a running one whose lease ran
    out: ``reclaim_update``)."""
    return sources_of(JobStatus.RUNNING) - HELD_STATES


def status_in(states: frozenset[JobStatus]) -> tuple[dict[str, str], dict[str, Any], str]:
    ordered = sorted(s.value for s in states)
    values = {f":from{i}": s for i, s in enumerate(ordered)}
    clause = f"#status IN ({', '.join(values)})"
    return {"#status": "status"}, values, clause


def update_expression(sets: list[str], removes: list[str]) -> str:
    return "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")


# What every claim writes: a new attempt under a fresh lease, no longer deferred or due.
CLAIM_SETS = (
    "#status = :running, status_pk = :sp, attempt = attempt + :one, "
    "lease_owner = :owner, lease_expires_at = :until, started_at = :started, "
    "updated_at = :started, ops_pk = :ops, ops_sk = :ops_sk"
)
CLAIM_REMOVES = "REMOVE deferred_reason, deferred_to, deferred_due, retry_at"


def claim_values(
    job_id: str, *, status_key: str, owner: str, lease_until: int, now: int, started_at: str
) -> dict[str, Any]:
    """The values of a claim's write (``claim_update``'s and ``reclaim_update``'s)."""
    return {
        ":running": JobStatus.RUNNING.value,
        ":now": now,
        ":one": 1,
        ":owner": owner,
        ":until": lease_until,
        ":started": started_at,
        ":sp": status_key,
        ":ops": ops_key("lease", job_id),
        ":ops_sk": ops_time(lease_until),
    }


def reserving(events: int) -> tuple[str, dict[str, Any]]:
    """The ADD clause a claim reserves ``events`` run-event numbers (and as much of the
    job's allowance) with, on the record's counter; nothing for a record without one."""
    if events <= 0:
        return "", {}
    return "events_seq :ev, events_bounded :ev", {":ev": events}


def claim_update(claim: dict[str, Any], *, events: int = 0) -> Update:
    """A new attempt (``claim``: ``claim_values``): from queued, retry_scheduled or
    scheduled, only before the job's deadline (latest start), reserving ``events`` run-event
    numbers. A running job whose lease ran out is ``reclaim_update``'s."""
    # Never a held job (running, or waiting for a person): its worker resumes a waiting one
    # itself, and a running one is taken from a dead worker only by ``reclaim_update``.
    names, values, in_clause = status_in(claimable())
    values.update(claim)
    values.update(
        {
            ":retry": JobStatus.RETRY_SCHEDULED.value,
            ":scheduled": JobStatus.SCHEDULED.value,
            ":due": claim[":now"] + RETRY_DUE_SLACK_S,
        }
    )
    condition = (
        f"attribute_exists(pk) AND {in_clause} AND "
        "(attribute_not_exists(deadline_at) OR deadline_at >= :now) AND "
        # A duplicate of a retry's message must not start the attempt before its backoff,
        # nor a scheduled job before its start.
        "(#status <> :retry OR attribute_not_exists(retry_at) OR retry_at <= :due) AND "
        "(#status <> :scheduled OR attribute_not_exists(run_at) OR run_at <= :due)"
    )
    adds, reserved = reserving(events)
    values.update(reserved)
    expression = f"SET {CLAIM_SETS} {CLAIM_REMOVES}" + (f" ADD {adds}" if adds else "")
    return Update(expression, condition, names, values)


def reclaim_update(claim: dict[str, Any], *, attempt: int, events: int = 0) -> Update:
    """A new attempt (``claim``: ``claim_values``) of a running job whose lease ran out (its
    worker stopped): what a take-back writes, one more lost lease and
    ``rules.lost_lease_error``, in the claim's own write. Only from ``attempt``, the one
    seen lost: its lease is counted once."""
    adds, reserved = reserving(events)
    values = {
        **claim,
        **reserved,
        ":attempt": attempt,
        ":error": lost_lease_error(attempt).model_dump_json(),
    }
    condition = "#status = :running AND lease_expires_at < :now AND attempt = :attempt"
    expression = f"SET {CLAIM_SETS}, #error = :error {CLAIM_REMOVES} ADD leases_lost :one"
    expression += f", {adds}" if adds else ""
    return Update(expression, condition, {"#status": "status", "#error": "error"}, values)


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
    checkpoints: list[Checkpoint] | None = None,
    compensation: Compensation | None = None,
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
    elif status is JobStatus.NEEDS_REVIEW:
        removes += ["ops_pk", "ops_sk"]  # out of the sweeper's sight: a person resolves it
    elif status is JobStatus.DEAD_LETTERED:  # a reclaim at the dead-worker limit
        sets += ["ops_pk = :ops", "ops_sk = :ops_sk"]  # listed among the dead letters
        values.update({":ops": "dead", ":ops_sk": ops_time(epoch_of(at))})
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
    set_irreversible(sets, values, checkpoints=checkpoints, compensation=compensation)
    # From the held states the table allows into ``status`` (a job that waits for a person
    # may be cancelled, never succeed without running again).
    held = sorted(s.value for s in HELD_STATES & sources_of(status))
    values.update({f":held{i}": v for i, v in enumerate(held)})
    held_in = ", ".join(f":held{i}" for i in range(len(held)))
    del values[":running"]
    fence = f"#status IN ({held_in}) AND attempt = :attempt AND lease_owner = :owner"
    return Update(update_expression(sets, removes), fence, names, values)


def set_irreversible(
    sets: list[str],
    values: dict[str, Any],
    *,
    checkpoints: list[Checkpoint] | None = None,
    compensation: Compensation | None = None,
    resolution: Resolution | None = None,
) -> None:
    """The whole list of checkpoints, the compensation and the resolution, when given
    (only the worker holding the attempt, or a resolution of a job in review, writes them:
    no concurrent writer to merge with)."""
    if checkpoints is not None:
        sets.append("checkpoints = :checkpoints")
        values[":checkpoints"] = to_json([c.model_dump(mode="json") for c in checkpoints])
    if compensation is not None:
        sets.append("compensation = :compensation")
        values[":compensation"] = compensation.model_dump_json()
    if resolution is not None:
        sets.append("resolution = :resolution")
        values[":resolution"] = resolution.model_dump_json(by_alias=True)


def transition_update(
    job_id: str,
    target: JobStatus,
    *,
    status_key: str,
    at: str,
    error: JobError | None,
    lease_expired_before: int | None,
    retry_at: int | None,
    checkpoints: list[Checkpoint] | None = None,
) -> Update:
    """A move of a job no live worker holds, conditioned on the transition table."""
    names, values, in_clause = status_in(sources_of(target))
    condition = f"attribute_exists(pk) AND {in_clause}"
    adds = ""
    if lease_expired_before is not None:
        condition += (
            " AND #status IN (:running_now, :waiting_now) AND lease_expires_at < :expired_before"
        )
        values.update(
            {
                ":running_now": JobStatus.RUNNING.value,
                ":waiting_now": JobStatus.WAITING_FOR_HUMAN.value,
                ":expired_before": lease_expired_before,
            }
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
    elif target is JobStatus.NEEDS_REVIEW:
        # Nothing for the sweeper to do: a person resolves it.
        removes += ["ops_pk", "ops_sk", "lease_owner", "lease_expires_at", "unqueued_pk"]
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
    set_irreversible(sets, values, checkpoints=checkpoints)
    return Update(update_expression(sets, removes) + adds, condition, names, values)
