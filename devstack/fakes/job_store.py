"""An in-memory ``JobStore`` with the DynamoDB store's conditions, for fast lifecycle tests.

Every condition the DynamoDB adapter writes as a condition expression is written here as
Python over the same transition table and fence; ``tests/contract`` runs one suite against
both, so the two cannot drift apart.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from devstack.fakes.human_waits import FakeHumanWaits
from devstack.fakes.job_indexes import FakeJobIndexes
from devstack.fakes.review import FakeReview, irreversible
from devstack.fakes.takeovers import FakeTakeovers
from devstack.fakes.waiting import FakeWaiting
from devstack.fakes.watchers import FakeWatchers
from pagefleet.adapters.dynamodb.codec import (
    epoch_of,
    ops_key,
)
from pagefleet.adapters.dynamodb.updates import claimable
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
from pagefleet.jobs.rules import (
    RETRY_DUE_SLACK_S,
    WAITING_FIRST_LOOK_S,
    claim_refusal,
    lease_over,
    lost_lease_error,
)
from pagefleet.jobs.states import HELD_STATES, JobStatus, sources_of
from pagefleet.monitors.changes import Changes
from pagefleet.tenancy.limits import IDEMPOTENCY_TTL_S


@dataclass
class _Row:
    job: JobRecord
    unqueued: bool = True
    ops: tuple[str, int] | None = None  # (ops_pk, due epoch) in the sparse ops index


class FakeJobStore(
    FakeJobIndexes, FakeHumanWaits, FakeWatchers, FakeTakeovers, FakeReview, FakeWaiting
):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._rows: dict[tuple[str, str], _Row] = {}
        self._idempotency: dict[tuple[str, str], IdempotencyRecord] = {}
        self._edges: dict[tuple[str, str], list[str]] = {}
        self._watchers: dict[tuple[str, str], dict[str, int]] = {}

    # --- create / read ----------------------------------------------------------------------
    def create(
        self,
        record: JobRecord,
        idempotency_fingerprint: str | None = None,
        *,
        dispatch_at: int | None = None,
    ) -> None:
        key = (record.tenant_id, record.job_id)
        with self._lock:
            idem_key = (record.tenant_id, record.idempotency_key or "")
            held = self._idempotency.get(idem_key) if record.idempotency_key is not None else None
            if held is not None and held.expires_at > epoch_of(record.created_at):
                raise IdempotencyConflict(str(record.idempotency_key))
            if key in self._rows:
                raise IdempotencyConflict(record.job_id)
            ops = None
            unqueued = True
            if record.status is JobStatus.WAITING:
                first_look = epoch_of(record.created_at) + WAITING_FIRST_LOOK_S
                ops, unqueued = (ops_key("waiting", record.job_id), first_look), False
            elif dispatch_at is not None:
                ops, unqueued = (ops_key("due", record.job_id), dispatch_at), False
            elif record.deadline_at is not None:
                ops = (ops_key("deadline", record.job_id), record.deadline_at)
            self._rows[key] = _Row(record.model_copy(deep=True), unqueued=unqueued, ops=ops)
            for parent in record.request.depends_on:
                self._edges.setdefault((record.tenant_id, parent), []).append(record.job_id)
            if record.idempotency_key is not None:
                self._idempotency[idem_key] = IdempotencyRecord(
                    job_id=record.job_id,
                    fingerprint=idempotency_fingerprint or "",
                    expires_at=epoch_of(record.created_at) + IDEMPOTENCY_TTL_S,
                )

    def all_jobs(self) -> list[JobRecord]:
        """Every job of every tenant (tests and the fake unstarted-jobs count)."""
        with self._lock:
            return [row.job.model_copy(deep=True) for row in self._rows.values()]

    def get_idempotency(self, tenant_id: str, key: str, *, now: float) -> IdempotencyRecord | None:
        with self._lock:
            found = self._idempotency.get((tenant_id, key))
        return found if found is not None and found.expires_at > now else None

    def get(self, tenant_id: str, job_id: str, *, consistent: bool = True) -> JobRecord:
        with self._lock:
            return self._row(tenant_id, job_id).job.model_copy(deep=True)

    # --- writes -----------------------------------------------------------------------------
    def mark_enqueued(self, tenant_id: str, job_id: str, at: str) -> None:
        with self._lock:
            row = self._row(tenant_id, job_id)
            row.job = row.job.model_copy(update={"enqueued_at": at})
            row.unqueued = False

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
        with self._lock:
            row = self._row(tenant_id, job_id)
            job = row.job
            status = job.status
            reclaim = lease_over(job, now)  # its worker stopped: what a take-back writes
            startable = status in claimable() or reclaim
            before_deadline = job.deadline_at is None or job.deadline_at >= now or reclaim
            retry_due = (
                status is not JobStatus.RETRY_SCHEDULED
                or job.retry_at is None
                or job.retry_at <= now + RETRY_DUE_SLACK_S
            ) and (
                status is not JobStatus.SCHEDULED
                or job.run_at is None
                or job.run_at <= now + RETRY_DUE_SLACK_S
            )
            if not (startable and before_deadline and retry_due):
                raise claim_refusal(job.model_copy(deep=True), now)
            row.job = job.model_copy(
                update={
                    "status": JobStatus.RUNNING,
                    "attempt": job.attempt + 1,
                    "lease_owner": owner,
                    "lease_expires_at": lease_until,
                    "started_at": started_at,
                    "updated_at": started_at,
                    "deferred_reason": None,
                    "deferred_to": None,
                    "deferred_due": None,
                    "retry_at": None,
                    **(
                        {"leases_lost": job.leases_lost + 1, "error": lost_lease_error(job.attempt)}
                        if reclaim
                        else {}
                    ),
                    **(
                        {
                            "events_seq": (job.events_seq or 0) + events,
                            "events_bounded": job.events_bounded + events,
                        }
                        if events > 0
                        else {}
                    ),
                }
            )
            row.ops = (ops_key("lease", job_id), lease_until)
            return row.job.model_copy(deep=True)

    def allocate_events(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            if row is None or row.job.events_seq is None:
                raise NotFound(f"job {job_id} has no event counter", job_id=job_id)
            seq, total = row.job.events_seq + count, row.job.events_bounded + bounded
            row.job = row.job.model_copy(update={"events_seq": seq, "events_bounded": total})
            return seq - count + 1, total

    def extend_lease(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, lease_until: int
    ) -> JobRecord:
        with self._lock:
            row = self._fenced(
                tenant_id, job_id, attempt, owner, "no longer holds the lease", HELD_STATES
            )
            row.job = row.job.model_copy(update={"lease_expires_at": lease_until})
            if row.ops is not None:
                row.ops = (row.ops[0], lease_until)
            return row.job.model_copy(deep=True)

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
        held = HELD_STATES & sources_of(status)
        if not held:
            raise IllegalTransition(f"a running job cannot become {status.value}")
        with self._lock:
            row = self._fenced(
                tenant_id, job_id, attempt, owner, "lost its lease before finishing", held
            )
            update: dict[str, Any] = {
                "status": status,
                "updated_at": at,
                "artifacts": list(artifacts),
                # attempt_log, when given, replaces the history (bounded by the caller).
                "attempts": attempt_log
                if attempt_log is not None
                else [*row.job.attempts, history],
                "result": result,
                "result_artifact": result_artifact,
                "result_bytes": result_bytes,
                "error": error,
                "lease_owner": None,
                "lease_expires_at": None,
                "changes": Changes.model_validate(changes) if changes is not None else None,
            }
            if status.is_final:
                update["finished_at"] = at
                row.ops = None
                update["expires_at"] = expires_at
            elif status is JobStatus.RETRY_SCHEDULED:
                due = retry_at if retry_at is not None else 0
                update["retry_at"] = due
                row.ops = (ops_key("retry", job_id), due)
            elif status is JobStatus.NEEDS_REVIEW:
                row.ops = None
            elif status is JobStatus.DEAD_LETTERED:
                row.ops = ("dead", epoch_of(at))
            irreversible(update, checkpoints=checkpoints, compensation=compensation)
            row.job = row.job.model_copy(update=update, deep=True)
            return row.job.model_copy(deep=True)

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
        with self._lock:
            row = self._row(tenant_id, job_id)
            job = row.job
            allowed = job.status in sources_of(target)
            if lease_expired_before is not None:
                allowed = allowed and (
                    job.status in HELD_STATES and (job.lease_expires_at or 0) < lease_expired_before
                )
            if not allowed:
                raise IllegalTransition(
                    f"job {job_id} is {job.status.value}, cannot become {target.value}",
                    status=job.status.value,
                )
            update: dict[str, Any] = {"status": target, "updated_at": at}
            if lease_expired_before is not None:
                update["leases_lost"] = job.leases_lost + 1  # a lease taken back
            if target.is_final:
                update.update(finished_at=at, lease_owner=None, lease_expires_at=None)
                row.ops, row.unqueued = None, False
            elif target is JobStatus.DEAD_LETTERED:
                update.update(lease_owner=None, lease_expires_at=None)
                row.ops, row.unqueued = ("dead", epoch_of(at)), False
            elif target is JobStatus.NEEDS_REVIEW:
                update.update(lease_owner=None, lease_expires_at=None)
                row.ops, row.unqueued = None, False
            elif target is JobStatus.RETRY_SCHEDULED:
                due = retry_at if retry_at is not None else epoch_of(at)
                update.update(retry_at=due, lease_owner=None, lease_expires_at=None)
                row.ops = (ops_key("retry", job_id), due)
            elif target is JobStatus.QUEUED:
                # Redrive: a fresh retry budget, and the message must be sent again.
                update.update(
                    attempt_base=job.attempt,
                    enqueued_at=None,
                    error=None,
                    retry_at=None,
                    leases_lost=0,
                )
                row.ops, row.unqueued = None, True
            if error is not None:
                update["error"] = error
            irreversible(update, checkpoints=checkpoints)
            row.job = job.model_copy(update=update, deep=True)
            return row.job.model_copy(deep=True)

    def request_cancel(self, tenant_id: str, job_id: str, *, at: str) -> JobRecord:
        with self._lock:
            row = self._row(tenant_id, job_id)
            if row.job.status not in HELD_STATES:
                raise IllegalTransition(
                    f"job {job_id} is {row.job.status.value}, not running",
                    status=row.job.status.value,
                )
            if row.job.cancel_requested_at is None:
                row.job = row.job.model_copy(update={"cancel_requested_at": at})
            return row.job.model_copy(deep=True)

    def note_replay(self, tenant_id: str, job_id: str, replay_id: str) -> None:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            if row is not None and len(row.job.replays) < MAX_REPLAYS_LISTED:
                row.job = row.job.model_copy(update={"replays": [*row.job.replays, replay_id]})

    # --- helpers ----------------------------------------------------------------------------
    def expiry(self, tenant_id: str, job_id: str) -> int | None:
        """The record's TTL attribute (a test's look; the port has no reader for it)."""
        with self._lock:
            return self._row(tenant_id, job_id).job.expires_at

    def _row(self, tenant_id: str, job_id: str) -> _Row:
        row = self._rows.get((tenant_id, job_id))
        if row is None:
            raise NotFound(f"job {job_id} not found", job_id=job_id)
        return row

    def _fenced(
        self,
        tenant_id: str,
        job_id: str,
        attempt: int,
        owner: str,
        what: str,
        states: frozenset[JobStatus] = frozenset({JobStatus.RUNNING}),
    ) -> _Row:
        row = self._row(tenant_id, job_id)
        job = row.job
        if not (job.status in states and job.attempt == attempt and job.lease_owner == owner):
            raise LeaseLost(
                f"job {job_id} attempt {attempt} {what}",
                attempt=job.attempt,
                status=job.status.value,
            )
        return row
