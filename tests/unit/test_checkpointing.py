"""The worker's checkpoints around an irreversible step, on the in-memory fakes: written
before the step acts and after it returned, fenced by the attempt, never skipped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from browser_task.errors import RetryJob
from browser_task.run.checkpointing import ACT_MARGIN_S, AttemptLost, Progress
from devstack.fakes import FakeClock, FakeQueue
from pagefleet.backoff import Backoff, Jitter
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import LEASE_GRACE_S, LEASE_MARGIN_S, lease_until
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.sweeper import take_back_expired
from tests.unit.test_lifecycle import LEASE, claim, run_once

REQUEST = JobRequest.model_validate(
    {
        "steps": [
            {"action": "goto", "url": "http://127.0.0.1:9/order"},
            {"action": "click", "selector": "#place", "irreversible": True},
        ]
    }
)


def running(svc: JobServices) -> JobRecord:
    submit_job(svc, "t", REQUEST)
    return run_once(svc)[0]


def test_the_step_runs_between_started_and_done_with_the_results_so_far(
    svc: JobServices,
) -> None:
    job = running(svc)
    progress = Progress(svc.lifecycle, job)
    results: dict[str, Any] = {"total": "12.00"}
    seen: list[str] = []

    async def step() -> None:
        async with progress.around(1, "Place order", lambda: results):
            seen.append(svc.store.get("t", job.job_id).checkpoints[0].state)
            assert not progress.idle.is_set()
            results["number"] = "ORD-1"

    asyncio.run(step())
    record = svc.store.get("t", job.job_id)
    assert seen == ["started"]
    assert [(c.state, c.how, c.attempt) for c in record.checkpoints] == [("done", "ran", 1)]
    assert record.result == {"total": "12.00", "number": "ORD-1"}
    assert progress.idle.is_set() and progress.at_stake


def test_a_step_that_raised_stays_started(svc: JobServices) -> None:
    job = running(svc)
    progress = Progress(svc.lifecycle, job)

    async def step() -> None:
        async with progress.around(1, "Place order", dict):
            raise TimeoutError("the answer never came")

    with pytest.raises(TimeoutError):
        asyncio.run(step())
    assert [c.state for c in svc.store.get("t", job.job_id).checkpoints] == ["started"]
    assert progress.idle.is_set()


def test_a_lost_lease_stops_the_attempt_before_the_step_acts(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job = running(svc)
    clock.advance(LEASE + LEASE_GRACE_S + 1)
    take_back_expired(svc, now=int(clock.now()))  # its worker looked dead
    [back] = queue.receive("standard-high", max_messages=1, wait_seconds=0, visibility=LEASE)
    claim(svc, back, "w2")  # another attempt owns the job now
    acted = []

    async def step() -> None:
        async with Progress(svc.lifecycle, job).around(1, "Place order", dict):
            acted.append(True)

    with pytest.raises(AttemptLost):
        asyncio.run(step())
    assert acted == []
    assert svc.store.get("t", job.job_id).checkpoints == []


def test_a_worker_whose_lease_ended_does_not_act_though_no_one_took_the_job_yet(
    svc: JobServices, clock: FakeClock
) -> None:
    # Its heartbeats failed for a whole lease (DynamoDB unreachable, the machine starved);
    # a take-back is due any moment, and the next attempt's check could then run before this
    # attempt's click reached the site: the order placed twice.
    job = running(svc)
    clock.advance(LEASE - LEASE_MARGIN_S)
    acted = []

    async def step() -> None:
        async with Progress(svc.lifecycle, job, lease_s=LEASE).around(1, "Place order", dict):
            acted.append(True)

    with pytest.raises(AttemptLost, match="lease has ended"):
        asyncio.run(step())
    assert acted == []
    assert svc.store.get("t", job.job_id).checkpoints == []
    # Still taken back as a dead worker's job: its step never started, so a blind retry.
    clock.advance(LEASE_GRACE_S + 1)
    assert take_back_expired(svc, now=int(clock.now())).requeued == 1


def test_started_renews_the_lease_and_the_step_must_act_within_it(
    svc: JobServices, clock: FakeClock
) -> None:
    job = running(svc)
    clock.advance(LEASE - LEASE_MARGIN_S - 1)  # a second of the lease left, heartbeats late
    progress = Progress(svc.lifecycle, job, lease_s=LEASE)
    seen: dict[str, object] = {}

    async def step() -> None:
        async with progress.around(1, "Place order", dict):
            now = clock.now()
            seen["lease"] = svc.store.get("t", job.job_id).lease_expires_at
            # No take-back while it acts: the old lease's end is past, the new one is not.
            seen["taken"] = take_back_expired(svc, now=now + LEASE_GRACE_S + 2).requeued
            seen["timeout"] = progress.act_within_ms(120_000)
            clock.advance(5)
            seen["later"] = progress.act_within_ms(120_000)
            seen["short"] = progress.act_within_ms(1_000)

    asyncio.run(step())
    acting_ms = (LEASE - LEASE_MARGIN_S - ACT_MARGIN_S) * 1000
    assert seen == {
        "lease": lease_until(clock.now() - 5, LEASE),
        "taken": 0,
        "timeout": acting_ms,  # a step with a longer timeout gives up before the lease ends
        "later": acting_ms - 5_000,
        "short": 1_000,  # a shorter one keeps its own
    }
    assert progress.act_within_ms(120_000) == 120_000  # once it returned: as asked
    assert [c.state for c in svc.store.get("t", job.job_id).checkpoints] == ["done"]


def test_a_store_that_keeps_failing_means_the_step_does_not_run(
    svc: JobServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = running(svc)
    progress = Progress(svc.lifecycle, job)

    def broken(*args: object, **kwargs: object) -> None:
        raise ConnectionError("DynamoDB is not answering")

    monkeypatch.setattr(svc.store, "record_progress", broken)
    monkeypatch.setattr(
        "browser_task.run.checkpointing.WRITE_BACKOFF", Backoff(1e-3, 1e-3, Jitter.NONE)
    )
    acted = []

    async def step() -> None:
        async with progress.around(1, "Place order", dict):
            acted.append(True)

    with pytest.raises(RetryJob, match="the step did not run"):
        asyncio.run(step())
    assert acted == []
    # The attempt's outcome says so (the write may have landed), and nothing is at stake.
    assert [c.state for c in progress.checkpoints] == ["not_done"] and not progress.at_stake
