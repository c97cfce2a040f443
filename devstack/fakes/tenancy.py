"""In-memory tenancy stores with the DynamoDB adapters' conditions (``tests/contract`` holds
them to the same suite): counters, the unstarted-jobs count, usage and audit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from devstack.fakes import FAKE_POLICY, FakeArtifactStore, FakeClock, FakeTenantStore
from devstack.fakes.job_store import FakeJobStore
from devstack.fakes.queue import FakeQueue
from pagefleet.adapters.dynamodb import CursorCodec
from pagefleet.jobs.service import JobServices
from pagefleet.specs.tenant_defaults import LimitDefaults
from pagefleet.tenancy.admission import Quotas
from pagefleet.tenancy.audit import AuditRecord
from pagefleet.tenancy.gate import TenantGate
from pagefleet.tenancy.limits import LimitsCache
from pagefleet.tenancy.ports import UNSTARTED, CounterView, SlotTake, SpendHold, SpendResult
from pagefleet.tenancy.service import Tenancy
from pagefleet.tenancy.usage import ALL_WORKFLOWS, AttemptUsage, UsageRow


@dataclass
class _Tenant:
    tat: int | None = None
    minute: int = -1
    minute_count: int = 0
    queued: int | None = None
    version: int = 0
    recounted_at: int | None = None
    running: set[str] = field(default_factory=set)


class FakeTenantCounters:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.tenants: dict[str, _Tenant] = {}
        self.spends = 0

    def _t(self, tenant_id: str) -> _Tenant:
        return self.tenants.setdefault(tenant_id, _Tenant())

    def spend(
        self, tenant_id: str, *, jobs: int, cost_ms: int, tolerance_ms: int, now_ms: int
    ) -> SpendResult:
        with self._lock:
            self.spends += 1
            t = self._t(tenant_id)
            if cost_ms > tolerance_ms:
                return SpendResult(False, t.tat, 0)
            if t.tat is None or t.tat < now_ms:
                t.tat = now_ms + cost_ms
            elif t.tat + cost_ms - now_ms <= tolerance_ms:
                t.tat += cost_ms
            else:
                return SpendResult(False, t.tat)
            minute = now_ms // 60_000
            t.minute_count = t.minute_count + jobs if t.minute == minute else jobs
            t.minute = minute
            return SpendResult(True, t.tat)

    def spend_and_hold(
        self, tenant_id: str, *, cost_ms: int, tolerance_ms: int, now_ms: int, limit: int
    ) -> SpendHold:
        with self._lock:  # one write on the adapter: nothing moves in between
            spent = self.spend(
                tenant_id, jobs=1, cost_ms=cost_ms, tolerance_ms=tolerance_ms, now_ms=now_ms
            )
            if not spent.allowed:
                return SpendHold(spent, None)
            return SpendHold(spent, self.add_queued(tenant_id, 1, limit=limit))

    def add_queued(self, tenant_id: str, jobs: int, *, limit: int) -> int | None:
        with self._lock:
            t = self._t(tenant_id)
            if jobs > limit or (t.queued is not None and t.queued > limit - jobs):
                return None
            t.queued = (t.queued or 0) + jobs
            t.version += 1
            return t.queued

    def sub_queued(self, tenant_id: str, jobs: int) -> None:
        with self._lock:
            t = self._t(tenant_id)
            if t.queued is not None and t.queued >= jobs:
                t.queued -= jobs
                t.version += 1

    def recount_queued(
        self, tenant_id: str, actual: Callable[[], int], *, now: int, every_s: int
    ) -> int | None:
        with self._lock:
            t = self._t(tenant_id)
            if t.recounted_at is not None and t.recounted_at >= now - every_s:
                return None
            t.recounted_at = now
            version = t.version
        count = actual()
        with self._lock:
            if t.version != version:
                return None
            t.queued = count
            return count

    def take_slot(self, tenant_id: str, job_id: str, *, limit: int) -> SlotTake:
        with self._lock:
            t = self._t(tenant_id)
            if job_id in t.running or len(t.running) < limit:
                t.running.add(job_id)
                return SlotTake(True, frozenset(t.running))
            return SlotTake(False, frozenset(t.running))

    def give_back_held(self, tenant_id: str, job_id: str) -> bool:
        with self._lock:
            running = self._t(tenant_id).running
            held = job_id in running
            running.discard(job_id)
            return held

    def slot_holders(self) -> dict[str, frozenset[str]]:
        with self._lock:
            return {tenant: frozenset(t.running) for tenant, t in self.tenants.items() if t.running}

    def give_back(self, tenant_id: str, job_id: str) -> None:
        with self._lock:
            self._t(tenant_id).running.discard(job_id)

    def view(self, tenant_id: str, *, now_ms: int) -> CounterView:
        with self._lock:
            t = self._t(tenant_id)
            same = t.minute == now_ms // 60_000
            return CounterView(
                tat_ms=t.tat,
                minute_submits=t.minute_count if same else 0,
                queued=max(0, t.queued or 0),
                running=frozenset(t.running),
            )


class FakeUnstartedJobs:
    def __init__(self, store: FakeJobStore) -> None:
        self._store = store

    def count_unstarted(self, tenant_id: str) -> int:
        return sum(
            1
            for job in self._store.all_jobs()
            if job.tenant_id == tenant_id
            and job.status in UNSTARTED
            and job.attempt == job.attempt_base
        )


class FakeUsageStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.markers: dict[tuple[str, str, int], AttemptUsage] = {}
        self.rows: dict[tuple[str, str, str], UsageRow] = {}

    def record(self, usage: AttemptUsage) -> bool:
        with self._lock:
            key = (usage.tenant_id, usage.job_id, usage.attempt)
            if key in self.markers:
                return False
            self.markers[key] = usage
            for workflow in (ALL_WORKFLOWS, usage.workflow):
                row_key = (usage.tenant_id, usage.day, workflow)
                row = self.rows.get(row_key) or UsageRow(
                    tenant_id=usage.tenant_id, day=usage.day, workflow=workflow
                )
                self.rows[row_key] = row.add(usage)
            return True

    def days(self, tenant_id: str, first: str, last: str) -> list[UsageRow]:
        with self._lock:
            found = [
                r for (t, day, _), r in self.rows.items() if t == tenant_id and first <= day <= last
            ]
        return sorted(found, key=lambda r: (r.day, r.workflow != ALL_WORKFLOWS, r.workflow))

    def every_tenant(self, day: str) -> list[UsageRow]:
        with self._lock:
            return sorted(
                (r for (_, d, w), r in self.rows.items() if d == day and w == ALL_WORKFLOWS),
                key=lambda r: r.tenant_id,
            )

    def attempts(self, tenant_id: str, job_id: str) -> list[AttemptUsage]:
        with self._lock:
            return sorted(
                (u for (t, j, _), u in self.markers.items() if t == tenant_id and j == job_id),
                key=lambda u: u.attempt,
            )


class FakeAuditLog:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)

    def recent(
        self, *, limit: int, before: str | None = None, months: int = 13
    ) -> list[AuditRecord]:
        newest = sorted(self.records, key=lambda r: r.audit_id, reverse=True)
        if before is not None:
            newest = [r for r in newest if r.audit_id < before]
        return newest[:limit]


def fake_tenancy(
    clock: FakeClock,
    *,
    defaults: LimitDefaults | None = None,
    tenants: FakeTenantStore | None = None,
    usage: bool = True,
) -> tuple[JobServices, Tenancy]:
    """Job services whose lifecycle keeps tenant limits, and the tenancy around them, on
    in-memory fakes sharing one clock."""
    store = FakeJobStore()
    policies = tenants or FakeTenantStore()
    counters = FakeTenantCounters()
    limits = LimitsCache(policies, defaults or LimitDefaults(), ttl_s=0)
    gate = TenantGate(counters, limits, store)
    svc = JobServices.of(
        store,
        FakeQueue(clock),
        FakeArtifactStore(),
        CursorCodec(),
        clock=clock,
        hooks=gate,
        policy=FAKE_POLICY,
    )
    tenancy = Tenancy(
        policies=policies,
        limits=limits,
        quotas=Quotas(counters, limits, FakeUnstartedJobs(store), clock),
        gate=gate,
        audit=FakeAuditLog(),
        usage=FakeUsageStore() if usage else None,
        clock=clock,
    )
    return svc, tenancy
