"""What a worker's slot leaves for later: the hooks' work after a claim, done once, by the
worker that claimed (no AWS, no browser)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
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
from devstack.fakes.tenancy import FakeAuditLog
from pagefleet.jobs.hooks import Deferral, NoHooks
from pagefleet.jobs.lifecycle import Then
from pagefleet.jobs.record import JobMessage, JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.specs.settings import WorkerSettings
from pagefleet.targets.breakers import Breakers
from tests.unit.test_lifecycle import POOL, receive, request


class Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def before_claim(self, message: JobMessage) -> Deferral | None:
        self.calls.append(("before_claim", message))
        return Deferral("over the cap", 2)

    def after_claim(self, job: JobRecord) -> None:
        self.calls.append(("after_claim", job))

    def after_move(self, job: JobRecord) -> None:
        self.calls.append(("after_move", job))

    def retention_s(self, tenant_id: str) -> int | None:
        self.calls.append(("retention_s", tenant_id))
        return 60


def test_only_the_work_after_a_claim_is_left_for_later() -> None:
    hooks = Recorded()
    later: list[tuple[Any, ...]] = []

    def submit(fn: Any, *args: Any) -> Future[Any]:
        later.append((fn, *args))
        return Future()

    wrapped = LaterHooks(hooks, submit)
    message, job = object(), object()
    # The decision before a claim is still made on the spot, and its answer kept.
    assert wrapped.before_claim(message) == Deferral("over the cap", 2)  # type: ignore[arg-type]
    wrapped.after_move(job)  # type: ignore[arg-type]
    assert wrapped.retention_s("t-1") == 60
    wrapped.after_claim(job)  # type: ignore[arg-type]
    assert hooks.calls == [
        ("before_claim", message),
        ("after_move", job),
        ("retention_s", "t-1"),
    ]
    fn, arg = later.pop()
    fn(arg)
    assert hooks.calls[-1] == ("after_claim", job)


def test_a_stopped_workers_hooks_still_count() -> None:
    hooks = Recorded()

    def shut_down(fn: Any, *args: Any) -> Future[Any]:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    job = object()
    LaterHooks(hooks, shut_down).after_claim(job)  # type: ignore[arg-type]
    assert hooks.calls == [("after_claim", job)]


# --- two workers in one process -----------------------------------------------------------------
class CountedHooks(NoHooks):
    """The tenant gate's part, counting each after-claim and the thread it ran on."""

    def __init__(self) -> None:
        self.after_claims: list[tuple[str, str]] = []  # (job id, thread name)

    def after_claim(self, job: JobRecord) -> None:
        self.after_claims.append((job.job_id, threading.current_thread().name))


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


def test_two_workers_in_one_process_run_each_hook_once_on_their_own_thread(
    clock: FakeClock,
) -> None:
    hooks = CountedHooks()
    svc = fake_services(clock, hooks=hooks)
    first, second = worker_over(svc, "w1"), worker_over(svc, "w2")
    # The process's services stay as they were built: the API, the sweeper and the CLI
    # share them with the workers.
    assert svc.lifecycle.hooks is hooks
    second._later.shutdown(wait=True)  # the second worker has stopped
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
    first._later.shutdown(wait=True)
    assert sorted(job_id for job_id, _ in hooks.after_claims) == sorted(jobs)  # once each
    ran = dict(hooks.after_claims)
    # The running worker's after-claim work ran on its own background thread, whatever the
    # stopped worker does (asked after it stopped, that one runs it on the spot).
    assert ran[jobs[0]].startswith("after-claim")
    assert ran[jobs[1]] == threading.current_thread().name
