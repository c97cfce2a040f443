"""The interfaces the core needs from the outside world (ports), and the clock.

Services and the lifecycle are typed on these Protocols, never on an adapter. The AWS
adapters in ``pagefleet.adapters`` implement them for DynamoDB, SQS, S3 and Secrets Manager;
``devstack/fakes`` implements them in memory with the same conditions, and the contract suite
in ``tests/contract`` holds both to the same behaviour.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.record import Artifact, AttemptRecord, JobError, JobMessage, JobRecord
from pagefleet.jobs.rules import LeaseRenewal
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.takeover import Takeover


@dataclass(frozen=True)
class RunSignals:
    """What the worker running a job reads of its record every second: whether a cancel was
    asked for, the live connections watching its page (``pagefleet.live.watch``) and the
    person holding it (``pagefleet.jobs.takeover``; as stored, its time run out or not)."""

    cancel_requested: bool = False
    watchers: frozenset[str] = frozenset()
    takeover: Takeover | None = None


@dataclass(frozen=True)
class JobFilter:
    """A job listing's filters besides the status (``pagefleet.jobs.listing``): exact
    matches, combined (all given must hold); None: not filtered on."""

    name: str | None = None  # the job request's name
    workflow: str | None = None  # the named workflow, any version
    schedule_id: str | None = None  # the schedule that made the job

    def __bool__(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    def matches(self, job: JobRecord) -> bool:
        return (
            (self.name is None or job.request.name == self.name)
            and (self.workflow is None or job.workflow == self.workflow)
            and (self.schedule_id is None or job.schedule_id == self.schedule_id)
        )

    def digest(self) -> str | None:
        """What a cursor carries to be refused with another filter set (None: no filter)."""
        if not self:
            return None
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


NO_FILTER = JobFilter()


class Clock(Protocol):
    """Wall-clock time in epoch seconds (the lease, retry and deadline arithmetic)."""

    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


SYSTEM_CLOCK: Clock = SystemClock()


@dataclass(frozen=True)
class IdempotencyRecord:
    job_id: str
    fingerprint: str
    expires_at: int  # epoch seconds: the key is free again from then (IDEMPOTENCY_TTL_S)


@dataclass(frozen=True)
class ReceivedMessage:
    message: JobMessage | None  # None when the body is not a job message (poison)
    receipt_handle: str
    message_id: str
    receive_count: int
    sent_at_ms: int
    body: str
    queue: str = ""  # the key of the queue it came from (pool, or pool-priority)


class JobStore(Protocol):
    """Job records and idempotency keys, tenant first. Every status change is conditional
    on the transition table; every worker write is fenced on (attempt, lease_owner).
    Refused writes raise ``IllegalTransition`` (or a subclass) or ``LeaseLost``."""

    def create(
        self,
        record: JobRecord,
        idempotency_fingerprint: str | None = None,
        *,
        dispatch_at: int | None = None,
    ) -> None:
        """Write a new job in its first state. A waiting job's dependency edges go with it;
        ``dispatch_at`` (a scheduled job due in more than 15 minutes) puts it in the sweeper's
        due set instead of expecting its message now. Its idempotency key is taken unless a
        job holds it still at the record's ``created_at`` (``IdempotencyConflict``)."""

    def get_idempotency(self, tenant_id: str, key: str, *, now: float) -> IdempotencyRecord | None:
        """The key's record, or None: never taken, or past its ``expires_at`` at ``now``
        (DynamoDB's TTL deletes an expired item days later, and reads return it meanwhile:
        the key lasts exactly its 24 h wherever it is read)."""
        ...

    def get(self, tenant_id: str, job_id: str, *, consistent: bool = True) -> JobRecord: ...

    def run_signals(self, tenant_id: str, job_id: str, *, now: int) -> RunSignals:
        """The cancel flag and the watchers whose watch lasts past ``now``: one small read,
        the one a running job's worker makes every second (an unknown job: no signals)."""
        ...

    def watch(
        self, tenant_id: str, job_id: str, connection_id: str, *, until: int, now: int
    ) -> None:
        """Mark the job watched by ``connection_id`` until ``until`` (epoch seconds); again
        extends it; watches past ``now`` may be forgotten. Raises ``NotFound``."""

    def unwatch(self, tenant_id: str, job_id: str, connection_id: str) -> None:
        """Forget ``connection_id``'s watch (idempotent)."""

    def take_over(self, tenant_id: str, job_id: str, takeover: Takeover, *, now: int) -> JobRecord:
        """Hold the job's page: when no one does, its holder's ``until`` is before ``now``,
        or by its holder again (then its takeover is kept, ``until`` renewed). Raises
        ``NotFound``, ``JobNotRunning`` (not running nor waiting for a person) and
        ``TakenOver`` (another holds it)."""
        ...

    def touch_takeover(
        self,
        tenant_id: str,
        job_id: str,
        takeover_id: str,
        *,
        holder: str,
        until: int,
        now: int,
        count_input: bool = False,
    ) -> Takeover:
        """Push the held takeover's ``until`` (``count_input``: and number an input batch,
        ``seq`` + 1), while it is ``takeover_id`` held by ``holder``, lasts past ``now`` and
        the job still runs;
        the takeover after the write. Raises ``TakeoverNotHeld``, ``NotFound``."""
        ...

    def release_takeover(
        self, tenant_id: str, job_id: str, takeover_id: str, *, expired_before: int | None = None
    ) -> Takeover | None:
        """Remove the takeover if it is ``takeover_id`` (``expired_before``: and only if its
        ``until`` is before it, the idle return); the one removed, None when the condition
        did not hold (another move won). Raises ``NotFound``."""
        ...

    def list_page(
        self,
        tenant_id: str,
        *,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
        where: JobFilter = NO_FILTER,
    ) -> tuple[list[JobRecord], dict[str, Any] | None]:
        """Newest first; a filtered page may be short (``pagefleet.jobs.listing``)."""

    def list_unqueued(self, created_before: str, limit: int = 100) -> list[JobRecord]: ...

    def count(self, tenant_id: str, status: JobStatus) -> int:
        """How many of the tenant's jobs are in ``status`` now."""

    def oldest(self, tenant_id: str, status: JobStatus) -> JobRecord | None:
        """The tenant's oldest job in ``status`` (by creation)."""

    def mark_enqueued(self, tenant_id: str, job_id: str, at: str) -> None: ...

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
        """A new attempt: from a claimable state before the deadline, or from running when
        the lease ended before ``now``, then counting the lost lease (``leases_lost`` + 1,
        the error ``rules.lost_lease_error``) in the same write. ``events`` > 0 reserves that
        many run-event numbers (and as much allowance) on the record's counter, which must
        have one (``events_seq``; ``pagefleet.live.numbers``). Raises what
        ``rules.claim_refusal`` names."""
        ...

    def allocate_events(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        """Reserve run-event numbers on the record's counter, as ``EventStore.allocate``
        does on its own (the first number, the bounded events reserved so far). Raises
        ``NotFound`` for a job without that counter (deleted, or recorded before it)."""
        ...

    def extend_lease(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, lease_until: int
    ) -> JobRecord: ...

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
    ) -> JobRecord: ...

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
        """An attempt's checkpoints (the whole list), its results so far and its
        compensation, fenced on (attempt, owner) like ``finish`` (raises ``LeaseLost``);
        with ``renewal``, also refused once the lease has ended, and the lease renewed."""

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
        """A job in review resolved: ``succeeded``, or ``queued`` with a fresh attempt budget
        (as a redrive). Only from needs_review, else ``IllegalTransition``."""

    def park(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, wait: HumanWait, at: str
    ) -> JobRecord:
        """running -> waiting_for_human with the question ``wait``, fenced on (attempt,
        owner) (raises ``LeaseLost``); the lease stays the worker's."""
        ...

    def resume(
        self, tenant_id: str, job_id: str, *, attempt: int, owner: str, at: str
    ) -> JobRecord:
        """waiting_for_human -> running, fenced on (attempt, owner) (raises ``LeaseLost``)."""
        ...

    def answer_wait(
        self, tenant_id: str, job_id: str, *, asked: HumanWait, answered: HumanWait, at: str
    ) -> JobRecord:
        """The owner's answer to the wait ``asked``, only while the job still waits with it
        (else ``IllegalTransition``)."""
        ...

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
    ) -> JobRecord: ...

    def request_cancel(self, tenant_id: str, job_id: str, *, at: str) -> JobRecord: ...

    def note_replay(self, tenant_id: str, job_id: str, replay_id: str) -> None:
        """Link ``replay_id`` to the job it replays (up to MAX_REPLAYS_LISTED of them)."""
        ...

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
        """Note why a queued job waits and, once it was sent, the message that carries it on
        (``deferred_to``) and when that message becomes visible (``deferred_due``)."""
        ...

    def postpone_retry(self, tenant_id: str, job_id: str, *, due: int) -> None: ...

    def ops_due(self, kind: str, before_epoch: int, limit: int = 100) -> list[tuple[str, str]]: ...

    def next_due(self, kind: str, after_epoch: int) -> int | None:
        """The earliest due time (epoch s) in the ops set ``kind`` at or after ``after_epoch``
        (for ``lease``: when the next running job's lease ends)."""

    def dependants(self, tenant_id: str, job_id: str) -> list[str]:
        """Ids of the jobs that name ``job_id`` in their ``depends_on``."""

    def dispatched(self, tenant_id: str, job_id: str, *, at: str) -> None:
        """A scheduled job's message is on its way: out of the due set."""

    def recheck_waiting(self, tenant_id: str, job_id: str, *, due: int) -> None:
        """A waiting job the sweeper looked at: look again at ``due``."""


# SQS takes at most ten entries in one batch request (DeleteMessageBatch, SendMessageBatch:
# TooManyEntriesInBatchRequest).
SQS_BATCH_MAX = 10


class JobQueue(Protocol):
    """A pool's queues (one per priority), named by key: ``standard``, ``standard-high``...
    Messages carry ids only; ``send`` picks the queue from the message."""

    def send(self, message: JobMessage, *, delay_seconds: int = 0) -> str: ...

    def receive(
        self, queue: str, *, max_messages: int, wait_seconds: int, visibility: int
    ) -> list[ReceivedMessage]: ...

    def delete(self, queue: str, receipt_handle: str) -> None: ...

    def delete_batch(self, queue: str, receipt_handles: list[str]) -> list[str]:
        """Delete many messages of one queue, ``SQS_BATCH_MAX`` a request; the handles
        not deleted."""

    def change_visibility(self, queue: str, receipt_handle: str, seconds: int) -> None: ...


class ArtifactStore(Protocol):
    def put(
        self,
        *,
        tenant_id: str,
        job_id: str,
        attempt: int,
        name: str,
        data: bytes,
        content_type: str,
        retention: str = ...,
        correlation_id: str | None = None,
    ) -> Artifact: ...

    def presign_get(self, key: str, ttl_seconds: int, download_name: str | None = None) -> str: ...

    def get(self, key: str) -> bytes: ...


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    tenant_id: str
    name: str
    created_at: str
    revoked: bool
    admin: bool


class TenantStore(Protocol):
    """API keys (stored by their SHA-256 only) and each tenant's policy."""

    def put_key(self, record: ApiKeyRecord, key_hash: str) -> None: ...

    def find_key(self, key_hash: str) -> ApiKeyRecord | None: ...

    def keys_of(self, tenant_id: str) -> list[tuple[str, ApiKeyRecord]]: ...

    def revoke(self, key_hash: str) -> None: ...

    def get_policy(self, tenant_id: str) -> TenantPolicy: ...

    def put_policy(self, tenant_id: str, policy: TenantPolicy) -> None: ...


class SecretStore(Protocol):
    """Resolves ``{{secrets.NAME}}`` for a tenant; None when the tenant has no such secret."""

    async def resolve(self, tenant_id: str, name: str) -> str | None: ...


class CursorCodec(Protocol):
    """Pagination cursors: ``decode`` accepts only what ``encode`` gave the same listing
    (tenant, status and the other filters), else raises ``InvalidRequest`` on ``cursor``."""

    def encode(
        self, tenant_id: str, key: Mapping[str, Any], *, where: JobFilter = NO_FILTER
    ) -> str: ...

    def decode(
        self,
        tenant_id: str,
        cursor: str,
        *,
        status: JobStatus | None = None,
        where: JobFilter = NO_FILTER,
    ) -> dict[str, Any]: ...
