"""Tenant limits in the lifecycle and at submission, on the fakes (no AWS, no Chromium)."""

from __future__ import annotations

import pytest

from devstack.fakes import FakeClock, FakeQueue, FakeTenantStore
from devstack.fakes.tenancy import FakeTenantCounters, fake_tenancy
from pagefleet.errors import QueueFull, RateLimited
from pagefleet.jobs import sweeper
from pagefleet.jobs.lifecycle import Outcome, Then
from pagefleet.jobs.models import JobRequest, TenantPolicy
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.rules import LEASE_GRACE_S
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.tenant_defaults import LimitDefaults
from pagefleet.tenancy import admission
from pagefleet.tenancy.admission import BatchItem
from pagefleet.tenancy.bucket import Bucket, answer
from pagefleet.tenancy.gate import DEFER_MAX_S, defer_delay
from pagefleet.tenancy.limits import LimitsChange, effective_limits
from pagefleet.tenancy.service import Tenancy

POOL = "standard"
LEASE = 60


def request(**extra: object) -> JobRequest:
    return JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}], **extra}
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def tenants() -> FakeTenantStore:
    return FakeTenantStore()


@pytest.fixture
def both(clock: FakeClock, tenants: FakeTenantStore) -> tuple[JobServices, Tenancy]:
    return fake_tenancy(clock, tenants=tenants, defaults=LimitDefaults(max_running=1))


@pytest.fixture
def svc(both: tuple[JobServices, Tenancy]) -> JobServices:
    return both[0]


@pytest.fixture
def tenancy(both: tuple[JobServices, Tenancy]) -> Tenancy:
    return both[1]


@pytest.fixture
def queue(svc: JobServices) -> FakeQueue:
    assert isinstance(svc.queue, FakeQueue)
    return svc.queue


def counters(tenancy: Tenancy) -> FakeTenantCounters:
    assert isinstance(tenancy.quotas.counters, FakeTenantCounters)
    return tenancy.quotas.counters


def submit(svc: JobServices, tenancy: Tenancy, tenant: str = "t", **extra: object) -> str:
    return admission.submit(svc, tenancy.quotas, tenant, request(**extra)).submitted.job.job_id


def receive(svc: JobServices) -> ReceivedMessage | None:
    """As a worker does: the high queue first (a dead worker's job is sent back there)."""
    for queue in (f"{POOL}-high", POOL):
        got = svc.queue.receive(queue, max_messages=1, wait_seconds=0, visibility=LEASE)
        if got:
            return got[0]
    return None


def claim(svc: JobServices, received: ReceivedMessage, owner: str = "w1"):
    return svc.lifecycle.claim(
        received, received.queue, owner=owner, lease_seconds=LEASE, worker=owner
    )


def running(svc: JobServices) -> list[str]:
    return [j.job_id for j in svc.store.all_jobs() if j.status is JobStatus.RUNNING]


# --- limits ---------------------------------------------------------------------------------
def test_limits_are_the_stage_defaults_overridden_per_tenant() -> None:
    defaults = LimitDefaults(submits_per_minute=60, max_running=5)
    assert effective_limits(TenantPolicy(), defaults).burst == 60  # burst follows the rate
    policy = LimitsChange(submits_per_minute=10, allow_evaluate=True).apply(TenantPolicy())
    limits = effective_limits(policy, defaults)
    assert (limits.submits_per_minute, limits.burst, limits.max_running) == (10, 10, 5)
    assert limits.allow_evaluate
    back = LimitsChange(reset=["submits_per_minute"]).apply(policy)
    assert effective_limits(back, defaults).submits_per_minute == 60
    with pytest.raises(ValueError, match="unknown limits"):
        LimitsChange(reset=["color"])


def test_the_bucket_headers_say_how_long_to_wait() -> None:
    bucket = Bucket(per_minute=30, burst=2)  # a token every 2 s
    now = 1_000_000
    assert answer(bucket, allowed=True, tat_ms=now + 2000, now_ms=now, cost=1).remaining == 1
    refused = answer(bucket, allowed=False, tat_ms=now + 4000, now_ms=now, cost=1)
    assert refused.headers() == {
        "RateLimit-Limit": "2",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "4",
        "Retry-After": "2",
    }


# --- submissions ----------------------------------------------------------------------------
def test_a_burst_over_the_rate_is_429_with_retry_after(
    svc: JobServices, tenancy: Tenancy, tenants: FakeTenantStore, clock: FakeClock
) -> None:
    tenants.put_policy("t", TenantPolicy(submits_per_minute=6, burst=2))  # one every 10 s
    submit(svc, tenancy)
    submit(svc, tenancy)
    with pytest.raises(RateLimited) as refused:
        submit(svc, tenancy)
    assert refused.value.headers["Retry-After"] == "10"
    assert refused.value.headers["RateLimit-Remaining"] == "0"
    assert submit(svc, tenancy, tenant="other")  # another tenant is not held back
    clock.advance(10)
    assert submit(svc, tenancy)


def test_the_queued_cap_is_429_naming_the_limit_and_frees_as_jobs_start(
    svc: JobServices, tenancy: Tenancy, tenants: FakeTenantStore
) -> None:
    tenants.put_policy("t", TenantPolicy(max_queued=2, max_running=5))
    submit(svc, tenancy)
    submit(svc, tenancy)
    with pytest.raises(QueueFull, match="max_queued") as full:
        submit(svc, tenancy)
    assert full.value.details["limit"] == "max_queued"
    received = receive(svc)
    assert received is not None and claim(svc, received).then is Then.RUN
    assert tenancy.quotas.view("t").queued == 1
    submit(svc, tenancy)


def test_a_queued_count_left_high_by_a_crash_is_recounted(
    svc: JobServices, tenancy: Tenancy, tenants: FakeTenantStore
) -> None:
    tenants.put_policy("t", TenantPolicy(max_queued=2))
    submit(svc, tenancy)
    counters(tenancy).add_queued("t", 1, limit=2)  # a submission that crashed after counting
    submit_job = submit(svc, tenancy)  # the recount finds room for it
    assert submit_job
    assert tenancy.quotas.view("t").queued == 2


def test_an_idempotent_replay_takes_no_queued_room(
    svc: JobServices, tenancy: Tenancy, tenants: FakeTenantStore
) -> None:
    tenants.put_policy("t", TenantPolicy(max_queued=1))
    first = admission.submit(svc, tenancy.quotas, "t", request(), idempotency_key="k")
    again = admission.submit(svc, tenancy.quotas, "t", request(), idempotency_key="k")
    assert not again.submitted.created
    assert again.submitted.job.job_id == first.submitted.job.job_id
    assert tenancy.quotas.view("t").queued == 1


def test_a_batch_counts_each_job_and_answers_per_item(
    svc: JobServices, tenancy: Tenancy, tenants: FakeTenantStore
) -> None:
    tenants.put_policy("t", TenantPolicy(submits_per_minute=60, burst=4, max_queued=3))
    items = [BatchItem(request(name=f"j{n}"), idempotency_key=f"k{n}") for n in range(6)]
    items[1] = BatchItem(request(name="j0"), idempotency_key="k0")  # a replay of item 0
    result = admission.submit_batch(svc, tenancy.quotas, "t", items, status_of=lambda e: 429)
    statuses = [r.status for r in result.items]
    # 4 tokens: items 0-3 admitted; item 1 replays item 0; items 0, 2, 3 fill max_queued 3;
    # items 4 and 5 are over the rate.
    assert statuses == [202, 202, 202, 202, 429, 429]
    assert result.items[1].submitted is not None and not result.items[1].submitted.created
    assert isinstance(result.items[4].error, RateLimited)
    assert tenancy.quotas.view("t").queued == 3


def test_a_key_repeated_in_a_batch_is_settled_in_the_batchs_order(
    svc: JobServices, tenancy: Tenancy
) -> None:
    for n in range(20):  # items are submitted side by side: the order must not be luck
        items = [
            BatchItem(request(name="same"), idempotency_key=f"k{n}"),
            BatchItem(request(name="same"), idempotency_key=f"k{n}"),
            BatchItem(request(name="other"), idempotency_key=f"k{n}"),
            *[BatchItem(request(name=f"x{i}")) for i in range(5)],
        ]
        got = admission.submit_batch(svc, tenancy.quotas, f"t{n}", items, status_of=lambda e: 409)
        assert [r.status for r in got.items[:3]] == [202, 202, 409]
        first, again = got.items[0].submitted, got.items[1].submitted
        assert first is not None and first.created
        assert again is not None and not again.created and again.job.job_id == first.job.job_id


# --- running cap ----------------------------------------------------------------------------
def test_a_job_over_the_running_cap_is_deferred_not_failed(
    svc: JobServices, tenancy: Tenancy, queue: FakeQueue, clock: FakeClock
) -> None:
    first, second = submit(svc, tenancy), submit(svc, tenancy)
    msg = receive(svc)
    assert msg is not None
    job = claim(svc, msg).job
    assert job is not None and job.job_id == first
    other = receive(svc)
    assert other is not None
    step = claim(svc, other, "w2")
    assert step.then is Then.DELETE  # re-sent with a delay: never counts toward the DLQ
    deferred = svc.store.get("t", second)
    assert deferred.status is JobStatus.QUEUED and deferred.attempt == 0
    assert "max_running 1" in (deferred.deferred_reason or "")
    resent, delay = queue.sent[-1]
    assert resent.job_id == second and resent.deferrals == 1 and 2 <= delay <= 4
    assert running(svc) == [first]
    svc.lifecycle.finish(job, Outcome(JobStatus.SUCCEEDED), "w1")
    clock.advance(delay)
    again = receive(svc)
    assert again is not None and claim(svc, again, "w2").then is Then.RUN
    assert running(svc) == [second]


def test_deferrals_back_off_up_to_a_bound() -> None:
    import random

    rng = random.Random(7)
    delays = [defer_delay(n, rng) for n in range(8)]
    assert delays[0] < delays[3]
    assert all(2 <= d <= DEFER_MAX_S * 1.5 + 1 for d in delays)
    assert defer_delay(9, random.Random(1)) != defer_delay(9, random.Random(2))  # spread


def test_a_killed_worker_does_not_leak_its_tenants_slot(
    svc: JobServices, tenancy: Tenancy, clock: FakeClock
) -> None:
    first, second = submit(svc, tenancy), submit(svc, tenancy)
    msg = receive(svc)
    step = claim(svc, msg) if msg is not None else None
    assert step is not None and step.job is not None and step.then is Then.RUN
    # The worker is killed: no finish, no heartbeat. The sweeper takes the job back, and its
    # running slot (max_running 1) stays its own: it starts again first, not deferred.
    clock.advance(LEASE + LEASE_GRACE_S + 1)
    report = sweeper.sweep(svc)
    assert report.leases_recovered == 1
    assert counters(tenancy).view("t", now_ms=0).running == {step.job.job_id}
    again = receive(svc)
    assert again is not None and again.queue == f"{POOL}-high"
    assert claim(svc, again, "w2").then is Then.RUN
    clock.advance(1)
    svc.lifecycle.finish(svc.store.get("t", step.job.job_id), Outcome(JobStatus.SUCCEEDED), "w2")
    # Both jobs run, one at a time, and the slot is given back at the end.
    ran = [step.job.job_id]
    while len(ran) < 2:
        got = receive(svc)
        assert got is not None
        step = claim(svc, got, "w2")
        if step.then is Then.RUN:
            assert step.job is not None and running(svc) == [step.job.job_id]
            ran.append(step.job.job_id)
            svc.lifecycle.finish(step.job, Outcome(JobStatus.SUCCEEDED), "w2")
        else:
            clock.advance(DEFER_MAX_S * 2)
    assert sorted(ran) == sorted([first, second])
    assert tenancy.quotas.view("t").running == frozenset()


def test_a_reclaim_after_a_dead_worker_keeps_one_slot(
    svc: JobServices, tenancy: Tenancy, clock: FakeClock
) -> None:
    job_id = submit(svc, tenancy)
    msg = receive(svc)
    assert msg is not None and claim(svc, msg, "w1").then is Then.RUN
    clock.advance(LEASE + LEASE_GRACE_S)  # w1 died; its lease is taken back
    sweeper.take_back_expired(svc, now=int(clock.now()))
    back = receive(svc)
    assert back is not None
    step = claim(svc, back, "w2")
    assert step.then is Then.RUN and step.job is not None and step.job.attempt == 2
    assert tenancy.quotas.view("t").running == {job_id}


def test_a_slot_left_by_a_crash_after_the_final_write_is_freed_when_needed(
    svc: JobServices, tenancy: Tenancy
) -> None:
    first, second = submit(svc, tenancy), submit(svc, tenancy)
    msg = receive(svc)
    assert msg is not None
    job = claim(svc, msg).job
    assert job is not None
    svc.lifecycle.finish(job, Outcome(JobStatus.SUCCEEDED), "w1")
    counters(tenancy).take_slot("t", first, limit=1)  # as if the give-back never happened
    other = receive(svc)
    assert other is not None
    step = claim(svc, other)
    assert step.then is Then.RUN and step.job is not None and step.job.job_id == second


def test_a_message_that_starts_nothing_leaves_no_slot_taken(
    svc: JobServices, tenancy: Tenancy, clock: FakeClock
) -> None:
    # A duplicate delivery (SQS is at least once) of a job that ends while the copy is on
    # its way: the gate took the job's slot before the claim, the claim finds the job over.
    # Found by the chaos run: the slot stayed taken until a refused take repaired it.
    job_id = submit(svc, tenancy)
    msg = receive(svc)
    assert msg is not None
    job = claim(svc, msg).job
    assert job is not None
    svc.lifecycle.finish(job, Outcome(JobStatus.SUCCEEDED), "w1")
    assert claim(svc, msg, "w2").then is not Then.RUN  # the copy
    assert tenancy.quotas.view("t").running == frozenset()
    # An early copy of a retry's message, hidden until the retry is due, holds none either.
    retried = submit(svc, tenancy)
    first = receive(svc)
    assert first is not None
    running_job = claim(svc, first).job
    assert running_job is not None and running_job.job_id == retried
    svc.lifecycle.finish(running_job, Outcome(JobStatus.RETRY_SCHEDULED, retry_delay_s=60), "w1")
    copy = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    early = claim(svc, copy[0]) if copy else claim(svc, first, "w2")
    assert early.then is not Then.RUN
    assert tenancy.quotas.view("t").running == frozenset()
    # A copy of a job running elsewhere leaves that job's slot to it.
    clock.advance(61)
    again = receive(svc)
    assert again is not None and claim(svc, again, "w3").then is Then.RUN
    assert claim(svc, again, "w4").then is not Then.RUN
    assert tenancy.quotas.view("t").running == {retried}
    assert job_id not in tenancy.quotas.view("t").running


def test_every_final_move_gives_the_slot_back(
    svc: JobServices, tenancy: Tenancy, clock: FakeClock
) -> None:
    for status in (JobStatus.FAILED, JobStatus.TIMED_OUT, JobStatus.CANCELLED):
        submit(svc, tenancy)
        msg = receive(svc)
        assert msg is not None
        job = claim(svc, msg).job
        assert job is not None
        svc.lifecycle.finish(job, Outcome(status), "w1")
        assert tenancy.quotas.view("t").running == frozenset(), status
    # A retry gives it back too, and takes it again when it runs.
    submit(svc, tenancy)
    msg = receive(svc)
    assert msg is not None
    job = claim(svc, msg).job
    assert job is not None
    outcome = Outcome(JobStatus.RETRY_SCHEDULED, retry_delay_s=0)
    svc.lifecycle.finish(job, outcome, "w1")
    assert tenancy.quotas.view("t").running == frozenset()


def test_queued_count_follows_cancel_expiry_dead_letter_and_redrive(
    svc: JobServices, tenancy: Tenancy
) -> None:
    cancelled, dead = submit(svc, tenancy), submit(svc, tenancy)
    assert tenancy.quotas.view("t").queued == 2
    svc.lifecycle.cancel("t", cancelled)
    assert tenancy.quotas.view("t").queued == 1
    assert receive(svc) is not None  # the cancelled job's message
    dead_msg = receive(svc)
    assert dead_msg is not None
    assert svc.lifecycle.dead_letter(dead_msg) == "marked"
    assert tenancy.quotas.view("t").queued == 0
    assert svc.lifecycle.redrive("t", dead)
    assert tenancy.quotas.view("t").queued == 1


def test_a_deep_backlog_is_spread_over_the_time_it_needs(
    svc: JobServices,
    tenancy: Tenancy,
    tenants: FakeTenantStore,
    queue: FakeQueue,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import random

    monkeypatch.setattr(random, "random", lambda: 0.99)
    tenants.put_policy("t", TenantPolicy(max_running=2))
    for _ in range(10):
        submit(svc, tenancy)
    delays = [delay for _, delay in queue.sent]
    # Up to twice its slots a tenant's jobs are visible at once; past that each waits about
    # its turn (queued / max_running job lengths), so other tenants' jobs are not behind it.
    assert delays[:4] == [0, 0, 0, 0]
    assert delays[4:] == [int(0.99 * n / 2) for n in range(5, 11)]
    submit(svc, tenancy, tenant="other")
    assert queue.sent[-1][1] == 0


def test_waiting_and_scheduled_jobs_hold_queued_room_until_they_start_or_end(
    svc: JobServices, tenancy: Tenancy
) -> None:
    parent = submit(svc, tenancy)
    child = submit(svc, tenancy, depends_on=[parent])
    later = submit(svc, tenancy, delay_seconds=3600)
    assert tenancy.quotas.view("t").queued == 3
    got = receive(svc)
    assert got is not None and got.message is not None and got.message.job_id == parent
    step = claim(svc, got)
    assert step.job is not None and tenancy.quotas.view("t").queued == 2
    svc.lifecycle.finish(step.job, Outcome(JobStatus.SUCCEEDED), "w1")
    # The child is released to the queue: still not started, counted once.
    assert svc.lifecycle.settle_waiting("t", child) is JobStatus.QUEUED
    assert tenancy.quotas.view("t").queued == 2
    svc.lifecycle.cancel("t", later)
    assert tenancy.quotas.view("t").queued == 1
