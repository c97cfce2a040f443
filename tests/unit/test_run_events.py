"""The worker's run events: batched writes, per-job bounds, masking, sequence numbers."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from browser_task.observe.reporting import attempt_ended, log_sink, step_events
from browser_task.observe.run_events import RunEvents, recording
from browser_task.observe.telemetry import JobLog
from devstack.fakes.live import FakeEventStore
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.jobs.record import JobRecord
from pagefleet.live.events import EventType
from pagefleet.pricing import Worker
from pagefleet.tenancy.spend import per_second_usd
from tests.support.records import job_record

NOW = 1_800_000_000


def _job(attempt: int = 1) -> JobRecord:
    return job_record(attempt=attempt)


def _stored(store: FakeEventStore) -> list[dict[str, Any]]:
    return [e for _, (e, _) in sorted(store.events.get(("t", "j1"), {}).items())]


def test_500_lines_are_written_in_batches_at_most_once_per_interval() -> None:
    store = FakeEventStore()
    flush_s = 0.2

    async def scenario() -> RunEvents:
        events = RunEvents(store, _job(), flush_s=flush_s)
        async with recording(events):
            for burst in range(10):
                for n in range(50):
                    events.emit(EventType.LOG, level="info", message=f"line {burst * 50 + n}")
                await asyncio.sleep(0.05)
        await events.close()
        return events

    events = asyncio.run(scenario())
    stored = _stored(store)
    assert [e["message"] for e in stored] == [f"line {n}" for n in range(500)]
    assert [e["seq"] for e in stored] == list(range(1, 501))
    # Never two writes within flush_s (the recorder's own send times), and no more batches
    # than the lines' span allows: one per interval, plus the final one at close.
    gaps = [b - a for a, b in zip(events.write_times, events.write_times[1:], strict=False)]
    assert all(gap >= flush_s - 1e-6 for gap in gaps[:-1]), gaps
    span = epoch_of_iso(stored[-1]["at"]) - epoch_of_iso(stored[0]["at"])
    assert store.puts <= math.floor(span / flush_s) + 2, (store.puts, span)
    assert store.puts < 50  # batches, not one write per line


def test_events_past_the_bound_are_dropped_and_counted_once() -> None:
    store = FakeEventStore()

    async def attempt(number: int, lines: int) -> None:
        events = RunEvents(store, _job(number), max_events=10, flush_s=0.05)
        async with recording(events):
            events.emit(EventType.STATE, status="running")
            for n in range(lines):
                events.emit(EventType.LOG, level="info", message=f"{number}:{n}")
            await asyncio.sleep(0.1)
        attempt_ended(events, "retry_scheduled", _Error("target answered 503"), 4)
        await events.close()

    asyncio.run(attempt(1, 25))
    stored = _stored(store)
    logs = [e for e in stored if e["type"] == "log"]
    assert [e["message"] for e in logs] == [f"1:{n}" for n in range(10)]
    truncated = [e for e in stored if e["type"] == "truncated"]
    assert len(truncated) == 1 and truncated[0]["dropped"] == 15
    retry = next(e for e in stored if e["type"] == "retry")
    assert (retry["reason"], retry["kind"], retry["delay_s"]) == ("target answered 503", "http", 4)
    assert [e["status"] for e in stored if e["type"] == "state"] == ["running", "retry_scheduled"]

    # The next attempt continues the numbering; the job's allowance is already spent.
    asyncio.run(attempt(2, 5))
    stored = _stored(store)
    second = [e for e in stored if e["attempt"] == 2]
    assert [e["type"] for e in second] == ["state", "retry", "state", "truncated"]
    assert second[-1]["dropped"] == 5
    seqs = [e["seq"] for e in stored]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


class _Error:
    def __init__(self, message: str) -> None:
        self.message = message
        self.kind = "http"


def test_secrets_are_masked_and_text_clipped() -> None:
    store = FakeEventStore()

    async def scenario() -> None:
        events = RunEvents(store, _job(), flush_s=0.05)
        events.mask_with(lambda text: text.replace("hunter2", "***"))
        log = JobLog(job_id="j1").recording(log_sink(events))
        async with recording(events):
            log.warning("login failed", error="password hunter2 refused")
            events.emit(EventType.NAVIGATION, url="http://x/?token=hunter2")
            events.emit(EventType.CONSOLE, level="log", message="y" * 5000)
        await events.close()

    asyncio.run(scenario())
    stored = _stored(store)
    assert stored[0]["message"] == "login failed (error=password *** refused)"
    assert stored[0]["level"] == "warning"
    assert stored[1]["url"] == "http://x/?token=***"
    assert len(stored[2]["message"]) == 2000 and stored[2]["message"].endswith("…")
    assert "hunter2" not in repr(stored)


def test_steps_report_start_duration_and_outcome() -> None:
    store = FakeEventStore()

    async def scenario() -> None:
        events = RunEvents(store, _job(), flush_s=0.05)
        async with recording(events):
            with step_events(events, 0, 2, "0", "goto", "goto http://x/"):
                await asyncio.sleep(0.01)
            try:
                with step_events(events, 1, 2, "1", "click", "click #buy"):
                    raise ValueError("no element #buy")
            except ValueError:
                pass
        await events.close()

    asyncio.run(scenario())
    stored = _stored(store)
    assert [(e["type"], e["index"]) for e in stored] == [
        ("step_started", 0),
        ("step_finished", 0),
        ("step_started", 1),
        ("step_finished", 1),
    ]
    assert stored[1]["outcome"] == "ok" and stored[1]["duration_ms"] >= 0
    assert stored[3]["outcome"] == "failed" and stored[3]["message"] == "no element #buy"
    assert stored[3]["of"] == 2 and stored[3]["label"] == "click #buy"


class FlakyStore(FakeEventStore):
    """Fails its first writes, as DynamoDB does when throttled."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def put(self, *args: Any, **kwargs: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("ProvisionedThroughputExceededException")
        super().put(*args, **kwargs)


def test_failed_writes_keep_the_events_and_their_numbers() -> None:
    store = FlakyStore(failures=2)

    async def scenario() -> None:
        events = RunEvents(store, _job(), flush_s=0.05)
        async with recording(events):
            for n in range(5):
                events.emit(EventType.LOG, level="info", message=str(n))
                await asyncio.sleep(0.03)
            await asyncio.sleep(0.2)
        await events.close()

    asyncio.run(scenario())
    stored = _stored(store)
    assert [e["message"] for e in stored] == [str(n) for n in range(5)]
    assert [e["seq"] for e in stored] == list(range(1, 6))


def test_two_writers_of_one_job_never_share_a_number() -> None:
    store = FakeEventStore()

    async def scenario() -> None:
        stale, fresh = (
            RunEvents(store, _job(1), flush_s=0.02),
            RunEvents(store, _job(2), flush_s=0.02),
        )
        async with recording(stale), recording(fresh):
            for n in range(20):
                stale.emit(EventType.LOG, level="info", message=f"stale {n}")
                fresh.emit(EventType.LOG, level="info", message=f"fresh {n}")
                await asyncio.sleep(0.005)
        await stale.close()
        await fresh.close()

    asyncio.run(scenario())
    stored = _stored(store)
    assert len(stored) == 40
    assert [e["message"] for e in stored if e["attempt"] == 2] == [f"fresh {n}" for n in range(20)]


def test_each_step_is_priced_and_the_top_level_ones_are_kept_for_the_outcome() -> None:
    store = FakeEventStore()
    shape = Worker(vcpu=2.0, memory_gb=4.0, slots=2)
    rate = per_second_usd(shape)

    async def scenario() -> RunEvents:
        events = RunEvents(store, _job(), flush_s=0.05, pricing=shape)
        async with recording(events):
            with (
                step_events(events, 0, 2, "0", "if", "if #banner"),
                step_events(events, 0, 2, "steps[0].then[0]", "click", "click #close"),
            ):
                await asyncio.sleep(0.01)
            try:
                with step_events(events, 1, 2, "1", "click", "click #buy"):
                    raise ValueError("no element #buy")
            except ValueError:
                pass
        await events.close()
        return events

    events = asyncio.run(scenario())
    finished = [e for e in _stored(store) if e["type"] == "step_finished"]
    assert [e["path"] for e in finished] == ["steps[0].then[0]", "0", "1"]
    for event in finished:  # its browser time at the job's rate (to a millisecond's worth)
        assert event["cost_usd"] == pytest.approx(
            event["duration_ms"] / 1000 * rate, abs=rate / 1000 + 1e-9
        )
    kept = events.step_times
    assert [(s.index, s.action, s.outcome) for s in kept] == [
        (0, "if", "ok"),
        (1, "click", "failed"),
    ]
    assert [s.cost_usd for s in kept] == [e["cost_usd"] for e in finished[1:]]
    assert kept[0].started_at <= kept[1].started_at


class CountingStore(FakeEventStore):
    def __init__(self) -> None:
        super().__init__()
        self.allocations = 0

    def allocate(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        self.allocations += 1
        return super().allocate(*args, **kwargs)


def test_an_attempt_asks_for_numbers_once_while_its_reservation_lasts() -> None:
    """A short job's last batch takes its numbers from what its first reserved (one store
    write a batch, not two); the next attempt's numbers come after the reservation."""
    store = CountingStore()

    async def attempt(number: int) -> None:
        events = RunEvents(store, _job(number), flush_s=0.05)
        events.emit(EventType.STATE, status="running")
        events.emit(EventType.LOG, level="info", message=f"{number}: first")
        await events.flush()
        events.emit(EventType.LOG, level="info", message=f"{number}: second")
        attempt_ended(events, "succeeded", None, None)
        await events.close()

    asyncio.run(attempt(1))
    assert (store.allocations, store.puts) == (1, 2)
    assert [e["seq"] for e in _stored(store)] == [1, 2, 3, 4]
    asyncio.run(attempt(2))
    assert (store.allocations, store.puts) == (2, 4)
    second = [e["seq"] for e in _stored(store) if e["attempt"] == 2]
    assert second == list(range(second[0], second[0] + 4)) and second[0] > 4
