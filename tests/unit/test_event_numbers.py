"""Run-event numbers from the counter on the job's record: a plain attempt numbers its
events from what its claim reserved (no write of their own beyond the puts), a takeover's
event keeps its place among them, the job's allowance holds across attempts, and a job
recorded before the counter goes on numbering from its own counter item."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from browser_task.observe.reporting import attempt_ended
from browser_task.observe.run_events import RunEvents
from devstack.fakes.job_store import FakeJobStore
from devstack.fakes.live import FakeEventStore
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import EventType
from pagefleet.live.history import append_event
from pagefleet.live.numbers import RESERVE, numbers_of
from tests.support.records import job_record

NOW = 1_800_000_000


class CountingJobs(FakeJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.allocations = 0

    def allocate_events(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        self.allocations += 1
        return super().allocate_events(*args, **kwargs)


class CountingEvents(FakeEventStore):
    def __init__(self) -> None:
        super().__init__()
        self.allocations = 0

    def allocate(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        self.allocations += 1
        return super().allocate(*args, **kwargs)


def _queued(jobs: FakeJobStore, *, events_seq: int | None = 0) -> JobRecord:
    record = job_record(status=JobStatus.QUEUED, events_seq=events_seq)
    jobs.create(record)
    return record


def _claim(jobs: FakeJobStore, owner: str, events: int, lease_s: int = 60) -> JobRecord:
    now = int(time.time())
    return jobs.claim(
        "t",
        "j1",
        owner=owner,
        lease_until=now + lease_s,
        now=now,
        started_at=iso(utcnow()),
        events=events,
    )


def _stored(store: FakeEventStore) -> list[dict[str, Any]]:
    return [e for _, (e, _) in sorted(store.events.get(("t", "j1"), {}).items())]


async def _plain_attempt(
    events_store: FakeEventStore, jobs: FakeJobStore, job: JobRecord, reserved: int, **kw: Any
) -> None:
    numbers = numbers_of(job, jobs, events_store)
    events = RunEvents(events_store, job, flush_s=0.05, numbers=numbers, reserved=reserved, **kw)
    events.emit(EventType.STATE, status="running")
    events.emit(EventType.NAVIGATION, url="http://x/")
    await events.flush()
    events.emit(EventType.LOG, level="info", message=f"attempt {job.attempt}")
    attempt_ended(events, "succeeded", None, None)
    await events.close()


def test_a_plain_attempt_numbers_its_events_from_its_claim_alone() -> None:
    jobs, store = CountingJobs(), CountingEvents()
    _queued(jobs)
    first = _claim(jobs, "w1", RESERVE, lease_s=-1)
    asyncio.run(_plain_attempt(store, jobs, first, RESERVE))
    assert (jobs.allocations, store.allocations, store.puts) == (0, 0, 2)
    assert [e["seq"] for e in _stored(store)] == [1, 2, 3, 4]
    # The next attempt's claim reserves after all the first one reserved: never a reuse.
    second = _claim(jobs, "w2", RESERVE)
    asyncio.run(_plain_attempt(store, jobs, second, RESERVE))
    assert (jobs.allocations, store.allocations) == (0, 0)
    later = [e["seq"] for e in _stored(store) if e["attempt"] == 2]
    assert later == [RESERVE + 1, RESERVE + 2, RESERVE + 3, RESERVE + 4]


def test_an_attempt_past_its_claims_numbers_asks_the_record_for_more() -> None:
    jobs, store = CountingJobs(), CountingEvents()
    _queued(jobs)
    job = _claim(jobs, "w1", RESERVE)

    async def long_attempt() -> None:
        events = RunEvents(
            store, job, flush_s=0.05, numbers=numbers_of(job, jobs, store), reserved=RESERVE
        )
        for n in range(RESERVE + 10):
            events.emit(EventType.LOG, level="info", message=f"line {n}")
        await events.close()

    asyncio.run(long_attempt())
    assert [e["seq"] for e in _stored(store)] == list(range(1, RESERVE + 11))
    assert (jobs.allocations, store.allocations) == (1, 0)


@pytest.mark.parametrize("on_record", [True, False], ids=["on-record", "own-counter"])
def test_a_takeovers_event_keeps_its_place_among_the_attempts(on_record: bool) -> None:
    """The API numbers a takeover's event from the job's counter: once the worker sees the
    takeover, its next events are numbered after it, not from its reservation."""
    jobs, store = CountingJobs(), CountingEvents()
    _queued(jobs, events_seq=0 if on_record else None)
    reserved = RESERVE if on_record else 0
    job = _claim(jobs, "w1", reserved)

    async def scenario() -> None:
        numbers = numbers_of(job, jobs, store)
        events = RunEvents(store, job, flush_s=0.05, numbers=numbers, reserved=reserved)
        events.emit(EventType.LOG, level="info", message="before")
        await events.flush()
        append_event(jobs, store, job, EventType.TAKEOVER, at=NOW, state="taken", holder="ops")
        events.renumber()  # PageTakeover.seen: the lock changed
        events.emit(EventType.LOG, level="info", message="after")
        await events.close()

    asyncio.run(scenario())
    stored = _stored(store)
    assert [e.get("message", e["type"]) for e in stored] == ["before", "takeover", "after"]
    assert [e["seq"] for e in stored] == sorted(e["seq"] for e in stored)
    if on_record:  # the claim's range, then the record's next number: no counter item
        assert stored[1]["seq"] == RESERVE + 1 and store.allocations == 0


def test_the_jobs_allowance_holds_across_claims() -> None:
    """An attempt keeps no more bounded events than the job has left, though its claim
    reserved its usual numbers; unbounded ones (its state) are always kept."""
    jobs, store = CountingJobs(), CountingEvents()
    _queued(jobs)
    first = _claim(jobs, "w1", RESERVE, lease_s=-1)
    asyncio.run(_plain_attempt(store, jobs, first, RESERVE, max_events=RESERVE + 1))
    second = _claim(jobs, "w2", RESERVE)
    asyncio.run(_plain_attempt(store, jobs, second, RESERVE, max_events=RESERVE + 1))
    kept = [e["type"] for e in _stored(store) if e["attempt"] == 2]
    assert kept == ["state", "navigation", "state", "truncated"]


def test_a_job_recorded_before_the_counter_goes_on_from_its_own_counter() -> None:
    jobs, store = CountingJobs(), CountingEvents()
    _queued(jobs, events_seq=None)
    store.allocate("t", "j1", count=40, bounded=10, expires_at=NOW)  # its earlier attempt's
    job = _claim(jobs, "w1", 0)  # the worker reserves none on such a record
    asyncio.run(_plain_attempt(store, jobs, job, 0))
    assert [e["seq"] for e in _stored(store)] == [41, 42, 43, 44]
    assert jobs.allocations == 0 and job.events_seq is None


def test_a_job_an_older_worker_claimed_goes_on_from_its_own_counter() -> None:
    """During the rollout that brought the counter: a worker of the version before claims a
    new job without reserving on its record and numbers from the job's counter item; the
    job's next attempt, here, goes on from there."""
    jobs, store = CountingJobs(), CountingEvents()
    queued = _queued(jobs)
    assert queued.events_on_record
    older = _claim(jobs, "old-worker", 0, lease_s=-1)  # the version before reserves nothing
    assert not older.events_on_record
    store.allocate("t", "j1", count=36, bounded=4, expires_at=NOW)  # its attempt's numbers
    job = _claim(jobs, "w2", RESERVE if older.events_on_record else 0)
    assert not job.events_on_record
    asyncio.run(_plain_attempt(store, jobs, job, 0))
    assert [e["seq"] for e in _stored(store)] == [37, 38, 39, 40]
    assert jobs.allocations == 0
