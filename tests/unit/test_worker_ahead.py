"""What a worker's slot leaves for later: the hooks' work after a claim, gathered a tenant's
together for up to a second, told once, by the worker that claimed (no AWS, no browser)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

from browser_task.__main__ import build_worker
from browser_task.egress.breakers import BreakerGate
from browser_task.slot.ahead import LaterHooks
from browser_task.slot.worker import Worker
from browser_task.tenant.access import SharedTenantData
from devstack.fakes import FakeClock, FakeSecrets, FakeTenantStore, fake_services
from devstack.fakes.live import FakeEventStore
from devstack.fakes.schedules import FakeScheduleStore
from devstack.fakes.session_commands import FakeCommandLedger
from devstack.fakes.session_inbox import FakeInboxRegistry, FakeSessionInbox
from devstack.fakes.tenancy import FakeAuditLog, FakeTenantCounters
from pagefleet.jobs.hooks import Deferral, NoHooks
from pagefleet.jobs.lifecycle import Then
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.record import JobMessage, JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.specs.settings import WorkerSettings
from pagefleet.specs.tenant_defaults import LimitDefaults
from pagefleet.targets.breakers import Breakers
from pagefleet.tenancy.gate import TenantGate
from pagefleet.tenancy.limits import effective_limits
from tests.unit.test_lifecycle import POOL, receive, request


class Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def before_claim(self, message: JobMessage) -> Deferral | None:
        self.calls.append(("before_claim", message))
        return Deferral("over the cap", 2)

    def after_claim(self, job: JobRecord) -> None:
        self.calls.append(("after_claim", job))

    def after_claims(self, jobs: Sequence[JobRecord]) -> None:
        self.calls.append(("after_claims", list(jobs)))

    def claim_not_made(self, message: JobMessage) -> None:
        self.calls.append(("claim_not_made", message))

    def after_move(self, job: JobRecord) -> None:
        self.calls.append(("after_move", job))

    def retention_s(self, tenant_id: str) -> int | None:
        self.calls.append(("retention_s", tenant_id))
        return 60


def claimed(tenant: str, job_id: str, attempt: int = 1) -> JobRecord:
    return cast(JobRecord, SimpleNamespace(tenant_id=tenant, job_id=job_id, attempt=attempt))


def test_only_the_work_after_a_claim_waits_and_a_tenants_claims_are_told_together() -> None:
    hooks, now = Recorded(), [0.0]
    wrapped = LaterHooks(hooks, within_s=1.0, monotonic=lambda: now[0])
    message, moved = object(), object()
    # The decision before a claim is still made on the spot, and its answer kept.
    assert wrapped.before_claim(message) == Deferral("over the cap", 2)  # type: ignore[arg-type]
    wrapped.after_move(moved)  # type: ignore[arg-type]
    assert wrapped.retention_s("t-1") == 60
    first, other = claimed("t-1", "a"), claimed("t-2", "b")
    wrapped.after_claim(first)
    wrapped.after_claim(other)
    now[0] = 0.5
    second = claimed("t-1", "c")
    wrapped.after_claim(second)
    wrapped.flush(due_only=True)  # nothing has waited a second yet
    assert hooks.calls == [
        ("before_claim", message),
        ("after_move", moved),
        ("retention_s", "t-1"),
    ]
    assert wrapped.waiting == 3
    now[0] = 1.0
    wrapped.flush(due_only=True)
    # One call a tenant, with every claim of its that waited: one write for the gate.
    assert hooks.calls[3:] == [("after_claims", [first, second]), ("after_claims", [other])]
    assert wrapped.waiting == 0


def test_a_stopping_worker_tells_what_waits_at_once() -> None:
    hooks = Recorded()
    wrapped = LaterHooks(hooks, within_s=60.0)
    job = claimed("t", "a")
    wrapped.after_claim(job)
    wrapped.flush()  # the worker's stop: whatever waits, due or not
    assert hooks.calls == [("after_claims", [job])]


def test_the_flusher_tells_each_claim_within_its_second() -> None:
    hooks = Recorded()
    wrapped = LaterHooks(hooks, within_s=0.05)
    job = claimed("t", "a")

    async def run() -> None:
        flusher = asyncio.create_task(wrapped.run_flusher())
        wrapped.after_claim(job)
        for _ in range(400):  # told after 0.05 s; the loop's bound is only a backstop
            await asyncio.sleep(0.01)
            if wrapped.waiting == 0:
                break
        flusher.cancel()
        await flusher

    asyncio.run(run())
    assert hooks.calls == [("after_claims", [job])]


class CountingCounters(FakeTenantCounters):
    def __init__(self) -> None:
        super().__init__()
        self.subs: list[tuple[str, int]] = []

    def sub_queued(self, tenant_id: str, jobs: int) -> None:
        self.subs.append((tenant_id, jobs))
        super().sub_queued(tenant_id, jobs)


def test_the_gate_takes_a_tenants_first_starts_off_its_queued_count_in_one_write(
    clock: FakeClock,
) -> None:
    counters = CountingCounters()
    svc = fake_services(clock)
    limits = effective_limits(TenantPolicy(), LimitDefaults())
    gate = TenantGate(counters, lambda tenant: limits, svc.store)
    for tenant, jobs in (("t", 3), ("u", 1)):
        assert counters.add_queued(tenant, jobs, limit=10) == jobs
    retry = cast(JobRecord, SimpleNamespace(tenant_id="t", job_id="r", attempt=2, attempt_base=0))
    first = [
        cast(JobRecord, SimpleNamespace(tenant_id=t, job_id=j, attempt=1, attempt_base=0))
        for t, j in (("t", "a"), ("u", "b"), ("t", "c"))
    ]
    gate.after_claims([*first, retry])
    # A retry left the count at its job's first start; the first starts go, a write a tenant.
    assert counters.subs == [("t", 2), ("u", 1)]
    assert counters.view("t", now_ms=0).queued == 1
    assert counters.view("u", now_ms=0).queued == 0


# --- two workers in one process -----------------------------------------------------------------
class CountedHooks(NoHooks):
    """The tenant gate's part, counting the claims each worker tells it of."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def after_claim(self, job: JobRecord) -> None:
        self.told.append(job.job_id)

    def after_claims(self, jobs: Sequence[JobRecord]) -> None:
        self.told.extend(job.job_id for job in jobs)


def worker_over(svc: JobServices, name: str) -> Worker:
    """A worker over the process's (fake) services, as ``build_worker`` wires one."""
    settings = WorkerSettings(
        jobs_table="jobs",
        tenants_table="tenants",
        artifacts_bucket="artifacts",
        queue_urls={POOL: "http://127.0.0.1:9/queue"},
    )
    return build_worker(
        settings,
        services=svc,
        worker_id=name,
        policies=FakeTenantStore(),
        tenant_data=SharedTenantData(svc.artifacts, FakeSecrets(), None, None),
        breakers=BreakerGate(cast(Breakers, object()), name),  # never asked: no job runs
        events=FakeEventStore(),
        schedules=FakeScheduleStore(),
        session_inbox=FakeSessionInbox(),
        inbox_registry=FakeInboxRegistry(),
        # Every port a fake: run alone, a default would look for AWS credentials (the
        # instance metadata address, refused here like any address but loopback).
        session_commands=FakeCommandLedger(),
        audit=FakeAuditLog(),
    )


def test_two_workers_in_one_process_tell_each_claim_once(clock: FakeClock) -> None:
    hooks = CountedHooks()
    svc = fake_services(clock, hooks=hooks)
    first, second = worker_over(svc, "w1"), worker_over(svc, "w2")
    # The process's services stay as they were built: the API, the sweeper and the CLI
    # share them with the workers.
    assert svc.lifecycle.hooks is hooks
    jobs = []
    for worker in (first, second):
        jobs.append(submit_job(svc, "t", request()).job.job_id)
        step = worker.lifecycle.claim(
            receive(svc),
            POOL,
            owner=worker.worker_id,
            lease_seconds=60,
            worker=worker.worker_id,
        )
        assert step.then is Then.RUN
    assert hooks.told == []  # each worker keeps its own claims for up to a second
    first._hooks.flush()
    assert hooks.told == [jobs[0]]
    second._hooks.flush()
    first._hooks.flush()
    assert hooks.told == jobs  # once each
