"""A worker's message deletes: ten a request, each within a second, none left at stop."""

from __future__ import annotations

import asyncio
import logging

import pytest

from browser_task.slot.deletes import GatheredDeletes
from devstack.fakes import FakeClock
from devstack.fakes.queue import FakeQueue
from pagefleet.jobs.ports import SQS_BATCH_MAX as BATCH
from pagefleet.jobs.record import JobMessage


class CountingQueue(FakeQueue):
    """The fake queue, with the batch deletes it was asked for."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.batches: list[tuple[str, int]] = []
        self.single_deletes = 0
        self.refuse = False

    def delete(self, pool: str, receipt_handle: str) -> None:
        self.single_deletes += 1
        super().delete(pool, receipt_handle)

    def delete_batch(self, pool: str, receipt_handles: list[str]) -> list[str]:
        self.batches.append((pool, len(receipt_handles)))
        if self.refuse:
            raise ConnectionError("the queue is unreachable")
        for handle in receipt_handles:
            FakeQueue.delete(self, pool, handle)  # not counted as a single delete
        return []


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000.0)


@pytest.fixture
def queue(clock: FakeClock) -> CountingQueue:
    return CountingQueue(clock)


def _received(queue: CountingQueue, count: int, pool: str = "standard") -> list[str]:
    for n in range(count):
        queue.send(
            JobMessage(tenant_id="t", job_id=f"j{n}", attempt=0, correlation_id="c", pool=pool)
        )
    got = queue.receive(pool, max_messages=count, wait_seconds=0, visibility=60)
    return [r.receipt_handle for r in got]


def test_deletes_wait_to_share_a_request_and_go_once_they_waited_their_time(
    queue: CountingQueue, clock: FakeClock
) -> None:
    deletes = GatheredDeletes(queue, within_s=1.0, monotonic=clock.now)
    for handle in _received(queue, 3):
        deletes.delete("standard", handle)
    deletes.flush(due_only=True)
    assert queue.batches == [] and queue.depth("standard") == 3  # not due yet
    clock.advance(1.0)
    deletes.flush(due_only=True)
    assert queue.batches == [("standard", 3)]  # one request for the three
    assert queue.depth("standard") == 0 and queue.single_deletes == 0
    assert deletes.waiting == 0


def test_a_full_batch_goes_at_once_and_each_queue_has_its_own(
    queue: CountingQueue, clock: FakeClock
) -> None:
    deletes = GatheredDeletes(queue, within_s=60, monotonic=clock.now)
    for handle in _received(queue, BATCH + 2):
        deletes.delete("standard", handle)
    high = _received(queue, 1, pool="standard-high")
    deletes.delete("standard-high", high[0])
    assert queue.batches == [("standard", BATCH)]  # the eleventh and twelfth still wait
    deletes.flush()  # the worker's stop: whatever waits, due or not
    assert sorted(queue.batches) == [("standard", 2), ("standard", BATCH), ("standard-high", 1)]
    assert queue.depth("standard") == 0 and queue.depth("standard-high") == 0


def test_a_failed_batch_is_logged_not_raised_and_its_messages_come_back(
    queue: CountingQueue, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    deletes = GatheredDeletes(queue, within_s=1.0, monotonic=clock.now)
    queue.refuse = True
    for handle in _received(queue, 2):
        deletes.delete("standard", handle)
    with caplog.at_level(logging.WARNING, logger="browser_task.slot.deletes"):
        deletes.flush()
    assert "2 message deletes not done (the queue is unreachable)" in caplog.text
    # Not deleted: each comes back after its visibility, as a copy the claim recognises.
    clock.advance(61)
    assert len(queue.receive("standard", max_messages=10, wait_seconds=0, visibility=60)) == 2


def test_the_flusher_sends_each_delete_within_its_time(queue: CountingQueue) -> None:
    deletes = GatheredDeletes(queue, within_s=0.05)
    handles = _received(queue, 4)

    async def scenario() -> None:
        flusher = asyncio.create_task(deletes.run_flusher())
        for handle in handles:
            deletes.delete("standard", handle)
        for _ in range(200):  # up to 2 s: far beyond the 0.05 s it may wait
            if deletes.waiting == 0:
                break
            await asyncio.sleep(0.01)
        flusher.cancel()
        await flusher

    asyncio.run(scenario())
    assert deletes.waiting == 0 and queue.depth("standard") == 0
    assert sum(n for _, n in queue.batches) == 4 and queue.single_deletes == 0


def test_everything_else_goes_straight_to_the_queue(queue: CountingQueue, clock: FakeClock) -> None:
    deletes = GatheredDeletes(queue, monotonic=clock.now)
    message = JobMessage(tenant_id="t", job_id="j", attempt=0, correlation_id="c", pool="standard")
    deletes.send(message)
    [got] = deletes.receive("standard", max_messages=1, wait_seconds=0, visibility=30)
    deletes.change_visibility("standard", got.receipt_handle, 0)
    [again] = deletes.receive("standard", max_messages=1, wait_seconds=0, visibility=30)
    assert again.message == message and again.receive_count == 2
