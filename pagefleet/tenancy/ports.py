"""The stores tenancy needs, as ports: counters (rate, queued, running), usage, audit.

The DynamoDB adapters live in ``pagefleet.adapters.dynamodb``; ``devstack/fakes`` holds the
in-memory versions and ``tests/contract`` runs one suite against both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pagefleet.jobs.states import JobStatus
from pagefleet.tenancy.audit import AuditRecord
from pagefleet.tenancy.usage import AttemptUsage, UsageRow


@dataclass(frozen=True)
class SpendResult:
    """A token-bucket spend: admitted or not, and the bucket's tat (ms) after it (admitted)
    or as it stood (refused); ``writes`` is how many conditional writes it took."""

    allowed: bool
    tat_ms: int | None
    writes: int = 1


@dataclass(frozen=True)
class SpendHold:
    """A submission's token and its room in the queued count, asked for together: ``spent``
    (the token, as ``spend`` answers it) and ``queued``, the count after holding room for
    the job (None: no room was held; with a token spent, the job may still find room after a
    recount)."""

    spent: SpendResult
    queued: int | None


@dataclass(frozen=True)
class SlotTake:
    """A running slot asked for: granted or not, and who holds the tenant's slots."""

    granted: bool
    holders: frozenset[str]


@dataclass(frozen=True)
class CounterView:
    tat_ms: int | None = None
    minute_submits: int = 0
    queued: int = 0
    running: frozenset[str] = field(default_factory=frozenset)


class TenantCounters(Protocol):
    """Per-tenant counters; every change is one conditional write, safe to run concurrently.

    - ``spend``: take ``jobs`` tokens from the submission bucket (GCRA, see ``bucket``) if
      that keeps ``tat`` within ``tolerance_ms`` of now; counts the minute's submissions.
    - queued: jobs submitted and not started, added under a cap (the count after, or None
      when refused), taken off as they start or end unstarted; ``recount_queued`` repairs a
      count a crash left too high. ``spend_and_hold`` is ``spend`` of one token and
      ``add_queued`` of one job in one conditional write, the way a single submission asks
      (the token alone when there is no room: a refused submission still spent its token).
    - running: the set of the tenant's running job ids. A set, so taking a slot twice for
      one job (a redelivery, a reclaim) or giving it back twice changes nothing.
    """

    def spend(
        self, tenant_id: str, *, jobs: int, cost_ms: int, tolerance_ms: int, now_ms: int
    ) -> SpendResult: ...

    def add_queued(self, tenant_id: str, jobs: int, *, limit: int) -> int | None: ...

    def spend_and_hold(
        self, tenant_id: str, *, cost_ms: int, tolerance_ms: int, now_ms: int, limit: int
    ) -> SpendHold: ...

    def sub_queued(self, tenant_id: str, jobs: int) -> None: ...

    def recount_queued(
        self, tenant_id: str, actual: Callable[[], int], *, now: int, every_s: int
    ) -> int | None: ...

    def take_slot(self, tenant_id: str, job_id: str, *, limit: int) -> SlotTake: ...

    def give_back(self, tenant_id: str, job_id: str) -> None: ...

    def give_back_held(self, tenant_id: str, job_id: str) -> bool:
        """Give back ``job_id``'s slot if it holds one (a conditional write): True when this
        call took it out, so a repair run twice at once counts it once."""
        ...

    def slot_holders(self) -> dict[str, frozenset[str]]:
        """Every tenant's running set that holds any slot (the sweeper's look for slots that
        ended jobs left behind)."""
        ...

    def view(self, tenant_id: str, *, now_ms: int) -> CounterView: ...


# A job in these states has not started: it holds room in its tenant's queued count.
UNSTARTED = (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.WAITING)


class UnstartedJobs(Protocol):
    """The true number of a tenant's jobs waiting for their first start (for a recount)."""

    def count_unstarted(self, tenant_id: str) -> int: ...


class UsageStore(Protocol):
    """Usage per attempt, summed per tenant and day and per workflow, idempotently: an
    attempt already recorded is not counted again (``record`` answers False)."""

    def record(self, usage: AttemptUsage) -> bool: ...

    def days(self, tenant_id: str, first: str, last: str) -> list[UsageRow]: ...

    def every_tenant(self, day: str) -> list[UsageRow]: ...

    def attempts(self, tenant_id: str, job_id: str) -> list[AttemptUsage]: ...


class AuditLog(Protocol):
    def write(self, record: AuditRecord) -> None: ...

    def recent(
        self, *, limit: int, before: str | None = None, months: int = 13
    ) -> list[AuditRecord]: ...
