"""Tenant counters, usage and audit: the fakes and the DynamoDB adapters, one suite."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.fakes.job_store import FakeJobStore
from devstack.fakes.tenancy import (
    FakeAuditLog,
    FakeTenantCounters,
    FakeUnstartedJobs,
    FakeUsageStore,
)
from devstack.provision import Provisioned
from devstack.strict_aws import StrictRules, rules_in_force
from pagefleet.adapters.dynamodb.audit import DynamoAuditLog
from pagefleet.adapters.dynamodb.tenant_counters import DynamoTenantCounters, DynamoUnstartedJobs
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.audit import audit_record
from pagefleet.tenancy.bucket import Bucket
from pagefleet.tenancy.usage import ALL_WORKFLOWS, AttemptUsage

NOW = 1_800_000_000_000  # ms, on a minute boundary
BUCKET = Bucket(per_minute=60, burst=3)  # one token a second, three at once


@pytest.fixture
def stores(backend: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    if backend == "fake":
        return {
            "counters": FakeTenantCounters(),
            "usage": FakeUsageStore(),
            "audit": FakeAuditLog(),
        }
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    db = RUNTIME.client("dynamodb")
    return {
        "counters": DynamoTenantCounters(db, provisioned.tenants_table),
        "usage": DynamoUsageStore(db, provisioned.usage_table),
        "audit": DynamoAuditLog(db, provisioned.tenants_table),
    }


def spend(counters: Any, now_ms: int, jobs: int = 1, tenant: str = "t") -> Any:
    return counters.spend(
        tenant,
        jobs=jobs,
        cost_ms=BUCKET.cost_ms(jobs),
        tolerance_ms=BUCKET.tolerance_ms,
        now_ms=now_ms,
    )


def test_the_bucket_admits_a_burst_then_one_a_token(stores) -> None:
    counters = stores["counters"]
    answers = [spend(counters, NOW).allowed for _ in range(4)]
    assert answers == [True, True, True, False]
    refused = spend(counters, NOW)
    assert not refused.allowed and refused.tat_ms == NOW + 3 * BUCKET.interval_ms
    # One token back a second later, not two.
    assert spend(counters, NOW + 1000).allowed
    assert not spend(counters, NOW + 1000).allowed
    # Idle long enough, the bucket is full again, never fuller.
    later = NOW + 60_000
    assert [spend(counters, later).allowed for _ in range(4)] == [True, True, True, False]
    # Tenants do not share a bucket.
    assert spend(counters, later, tenant="other").allowed


def test_a_batch_takes_its_tokens_at_once_or_not_at_all(stores) -> None:
    counters = stores["counters"]
    assert not spend(counters, NOW, jobs=4).allowed  # more than the burst: never
    assert spend(counters, NOW, jobs=2).allowed
    assert not spend(counters, NOW, jobs=2).allowed
    assert spend(counters, NOW, jobs=1).allowed


def test_the_minute_counts_every_submission_of_the_minute(stores) -> None:
    counters = stores["counters"]
    spend(counters, NOW + 1_000)
    spend(counters, NOW + 30_000)  # after an idle stretch: the count goes on
    spend(counters, NOW + 30_000, jobs=2)
    assert counters.view("t", now_ms=NOW + 59_000).minute_submits == 4
    assert counters.view("t", now_ms=NOW + 61_000).minute_submits == 0
    spend(counters, NOW + 62_000)
    assert counters.view("t", now_ms=NOW + 62_000).minute_submits == 1


def test_the_queued_count_keeps_its_cap_and_never_goes_below_zero(stores) -> None:
    counters = stores["counters"]
    assert counters.add_queued("t", 2, limit=3)
    assert not counters.add_queued("t", 2, limit=3)
    assert counters.add_queued("t", 1, limit=3)
    assert not counters.add_queued("t", 1, limit=3)
    counters.sub_queued("t", 3)
    counters.sub_queued("t", 1)  # nothing left to take off
    assert counters.view("t", now_ms=NOW).queued == 0
    assert counters.add_queued("t", 3, limit=3)


def spend_and_hold(counters: Any, now_ms: int, limit: int) -> Any:
    return counters.spend_and_hold(
        "t", cost_ms=BUCKET.cost_ms(1), tolerance_ms=BUCKET.tolerance_ms, now_ms=now_ms, limit=limit
    )


def test_a_submission_takes_its_token_and_its_room_together(stores) -> None:
    """``spend_and_hold``: the token and the room when both are there; the token alone when
    the count is full (a refused submission spent its token); neither over the rate."""
    counters = stores["counters"]
    first = spend_and_hold(counters, NOW, limit=2)
    assert first.spent.allowed and first.queued == 1
    assert spend_and_hold(counters, NOW, limit=2).queued == 2
    full = spend_and_hold(counters, NOW, limit=2)  # the third token of the burst, no room
    assert full.spent.allowed and full.queued is None
    assert full.spent.tat_ms == NOW + 3 * BUCKET.interval_ms
    view = counters.view("t", now_ms=NOW)
    assert (view.queued, view.minute_submits) == (2, 3)
    over = spend_and_hold(counters, NOW, limit=5)  # room, but no token: nothing taken
    assert not over.spent.allowed and over.queued is None
    assert counters.view("t", now_ms=NOW).queued == 2
    counters.sub_queued("t", 2)
    later = spend_and_hold(counters, NOW + 60_000, limit=2)  # a new minute, an idle bucket
    assert later.spent.allowed and later.queued == 1
    assert counters.view("t", now_ms=NOW + 60_000).minute_submits == 1
    # The bucket and the count are the tenant's, whichever way they were spent and held.
    assert spend(counters, NOW + 60_000, jobs=2).allowed
    assert not spend_and_hold(counters, NOW + 60_000, limit=2).spent.allowed
    assert counters.add_queued("t", 1, limit=2) == 2


def test_a_recount_sets_the_count_unless_it_moved_or_was_just_done(stores) -> None:
    counters = stores["counters"]
    counters.add_queued("t", 5, limit=5)
    assert counters.recount_queued("t", lambda: 2, now=1000, every_s=30) == 2
    assert counters.view("t", now_ms=NOW).queued == 2
    assert counters.recount_queued("t", lambda: 0, now=1010, every_s=30) is None

    def moving() -> int:
        counters.add_queued("t", 1, limit=10)  # a submission while counting
        return 0

    assert counters.recount_queued("t", moving, now=1100, every_s=30) is None
    assert counters.view("t", now_ms=NOW).queued == 3


def test_the_running_sets_holding_slots_are_listed_and_a_held_slot_given_back_once(
    stores,
) -> None:
    counters = stores["counters"]
    for tenant, job in (("t", "a"), ("t", "b"), ("u", "c")):
        assert counters.take_slot(tenant, job, limit=5).granted
    counters.take_slot("v", "d", limit=5)
    counters.give_back("v", "d")  # emptied: holds nothing, not listed
    assert counters.slot_holders() == {"t": frozenset({"a", "b"}), "u": frozenset({"c"})}
    assert counters.give_back_held("t", "a")
    assert not counters.give_back_held("t", "a")  # a second repair counts nothing
    assert not counters.give_back_held("w", "x")
    assert counters.slot_holders() == {"t": frozenset({"b"}), "u": frozenset({"c"})}


def test_a_view_read_back_part_done_still_shows_both_counts(stores) -> None:
    """DynamoDB may leave a key of the view's batch read unprocessed (the embedded AWS does
    with ``dynamodb_unprocessed_share``): it is asked again, never read as no count (a tenant
    at its cap of running sessions would have been let open another)."""
    counters = stores["counters"]
    assert counters.add_queued("t", 2, limit=5)
    assert counters.take_slot("t", "a", limit=2).granted
    with rules_in_force(StrictRules(queue_settle_s=0, dynamodb_unprocessed_share=1)):
        view = counters.view("t", now_ms=NOW)
    assert (view.queued, view.running) == (2, {"a"})


def test_running_slots_are_a_set_of_job_ids(stores) -> None:
    counters = stores["counters"]
    assert counters.take_slot("t", "a", limit=2).granted
    assert counters.take_slot("t", "a", limit=2).granted  # a redelivery: still one slot
    assert counters.take_slot("t", "b", limit=2).granted
    refused = counters.take_slot("t", "c", limit=2)
    assert not refused.granted and refused.holders == {"a", "b"}
    assert counters.take_slot("t", "a", limit=2).granted  # a holder may always reclaim
    counters.give_back("t", "a")
    counters.give_back("t", "a")  # twice changes nothing
    assert counters.view("t", now_ms=NOW).running == {"b"}
    assert counters.take_slot("t", "c", limit=2).granted
    counters.give_back("t", "b")
    counters.give_back("t", "c")
    assert counters.view("t", now_ms=NOW).running == frozenset()


def test_concurrent_takes_never_pass_the_limit(stores) -> None:
    counters = stores["counters"]
    granted: list[str] = []
    lock = threading.Lock()

    def take(job: str) -> None:
        if counters.take_slot("t", job, limit=3).granted:
            with lock:
                granted.append(job)

    threads = [threading.Thread(target=take, args=(f"j{n}",)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 3
    assert counters.view("t", now_ms=NOW).running == set(granted)


def attempt(job: str, n: int, *, day: str = "2026-11-30", workflow: str = "wf") -> AttemptUsage:
    return AttemptUsage(
        tenant_id="t",
        job_id=job,
        attempt=n,
        workflow=workflow,
        day=day,
        first_attempt=n == 1,
        browser_seconds=1.25,
        page_requests=7,
        artifact_bytes=1000,
        artifact_puts=2,
        status="succeeded",
    )


def test_usage_counts_each_attempt_once(stores) -> None:
    usage = stores["usage"]
    assert usage.record(attempt("j1", 1))
    assert not usage.record(attempt("j1", 1))  # a retried write counts nothing
    assert usage.record(attempt("j1", 2))
    assert usage.record(attempt("j2", 1, workflow="other"))
    assert usage.record(attempt("j3", 1, day="2026-12-01"))
    rows = {(r.day, r.workflow): r for r in usage.days("t", "2026-11-30", "2026-11-30")}
    assert set(rows) == {
        ("2026-11-30", ALL_WORKFLOWS),
        ("2026-11-30", "wf"),
        ("2026-11-30", "other"),
    }
    day = rows[("2026-11-30", ALL_WORKFLOWS)]
    assert (day.jobs, day.attempts, day.page_requests, day.artifact_puts) == (2, 3, 21, 6)
    assert day.browser_seconds == pytest.approx(3.75)
    assert rows[("2026-11-30", "wf")].attempts == 2
    assert len(usage.days("t", "2026-11-30", "2026-12-01")) == 5
    assert [r.tenant_id for r in usage.every_tenant("2026-11-30")] == ["t"]
    assert [a.attempt for a in usage.attempts("t", "j1")] == [1, 2]
    assert usage.attempts("t", "j1")[0].browser_seconds == pytest.approx(1.25)


def test_audit_lists_newest_first_and_pages(stores) -> None:
    audit = stores["audit"]
    start = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    written = [
        audit_record("admin:k", "key.created", tenant_id=f"t{n}", now=start + timedelta(seconds=n))
        for n in range(5)
    ]
    for record in written:
        audit.write(record)
    first = audit.recent(limit=3)
    assert [r.tenant_id for r in first] == ["t4", "t3", "t2"]
    rest = audit.recent(limit=3, before=first[-1].audit_id)
    assert [r.tenant_id for r in rest] == ["t1", "t0"]


def test_a_recount_finds_queued_scheduled_and_waiting_jobs_not_started(
    backend: str, svc: JobServices, request: pytest.FixtureRequest
) -> None:
    if backend == "fake":
        assert isinstance(svc.store, FakeJobStore)
        unstarted: Any = FakeUnstartedJobs(svc.store)
    else:
        provisioned: Provisioned = request.getfixturevalue("provisioned")
        unstarted = DynamoUnstartedJobs(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    tenant = f"recount-{uuid.uuid4().hex[:8]}"
    steps = [{"action": "goto", "url": "https://example.com/"}]
    parent = submit_job(svc, tenant, JobRequest.model_validate({"steps": steps})).job
    later = JobRequest.model_validate({"steps": steps, "delay_seconds": 3600})
    assert submit_job(svc, tenant, later).job.status is JobStatus.SCHEDULED
    child = JobRequest.model_validate({"steps": steps, "depends_on": [parent.job_id]})
    waiting = submit_job(svc, tenant, child).job
    assert waiting.status is JobStatus.WAITING
    assert unstarted.count_unstarted(tenant) == 3
    svc.lifecycle.cancel(tenant, parent.job_id)
    assert svc.lifecycle.settle_waiting(tenant, waiting.job_id) is JobStatus.CANCELLED
    assert unstarted.count_unstarted(tenant) == 1  # the scheduled job
