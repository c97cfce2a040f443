"""What an attempt's run events cost in DynamoDB requests (``bench/aws_requests.py``), on the
moto server with the real adapter."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from browser_task.observe.reporting import attempt_ended
from browser_task.observe.run_events import RunEvents
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import EventType
from pagefleet.runtime import RUNTIME
from tests.support.records import job_record


def _two_batches(db: Any, events: RunEvents) -> list[str]:
    """An attempt's two batches (the flusher's, then the one at close): the DynamoDB
    operations they sent."""
    calls: list[str] = []

    def count(model: object, **_: object) -> None:
        calls.append(str(getattr(model, "name", "?")))

    async def attempt() -> None:
        events.emit(EventType.STATE, status="running")
        events.emit(EventType.STEP_STARTED, index=0, of=1, path="0", action="goto")
        await events.flush()
        events.emit(EventType.STEP_FINISHED, index=0, of=1, path="0", action="goto")
        attempt_ended(events, "succeeded", None, None)
        await events.close()

    db.meta.events.register("before-call.dynamodb", count)
    try:
        asyncio.run(attempt())
    finally:
        db.meta.events.unregister("before-call.dynamodb", count)
    return calls


def test_a_short_attempts_last_batch_is_one_write(provisioned: Provisioned) -> None:
    """A job numbered from its own counter item (recorded before the counter moved to its
    record): one reservation of numbers for two batches, then puts alone."""
    db = RUNTIME.client("dynamodb")
    store = DynamoEventStore(db, provisioned.jobs_table)
    job = job_record(attempt=1, events_seq=None)
    calls = _two_batches(db, RunEvents(store, job, flush_s=0.05))
    assert calls == ["UpdateItem", "PutItem", "PutItem"]
    stored, more = store.page("t", "j1", after=0, limit=10, now=int(time.time()))
    assert [e["seq"] for e in stored] == [1, 2, 3, 4] and not more
    assert [e["type"] for e in stored] == ["state", "step_started", "step_finished", "state"]


def test_a_plain_attempt_numbered_from_its_claim_writes_its_events_only(
    provisioned: Provisioned,
) -> None:
    """The claim's write reserved the attempt's first numbers on the job's record: its two
    batches are two puts, and no counter update of their own."""
    from pagefleet.adapters.dynamodb.job_store import DynamoJobStore
    from pagefleet.jobs.models import iso, utcnow
    from pagefleet.live.numbers import RESERVE, numbers_of

    db = RUNTIME.client("dynamodb")
    store = DynamoEventStore(db, provisioned.jobs_table)
    jobs = DynamoJobStore(db, provisioned.jobs_table)
    jobs.create(job_record(job_id="j2", status=JobStatus.QUEUED))
    now = int(time.time())
    job = jobs.claim(
        "t",
        "j2",
        owner="w1",
        lease_until=now + 60,
        now=now,
        started_at=iso(utcnow()),
        events=RESERVE,
    )
    numbers = numbers_of(job, jobs, store)
    calls = _two_batches(db, RunEvents(store, job, flush_s=0.05, numbers=numbers, reserved=RESERVE))
    assert calls == ["PutItem", "PutItem"]
    stored, more = store.page("t", "j2", after=0, limit=10, now=int(time.time()))
    assert [e["seq"] for e in stored] == [1, 2, 3, 4] and not more
