"""The fakes mode of bench/e2e_throughput.py: each request to a fake is counted and delayed,
and a receive on an empty queue waits for a message as SQS's long poll does."""

from __future__ import annotations

import threading

from bench.fakes_worker import Delayed, LongPollQueue
from devstack.fakes import FakeQueue
from pagefleet.jobs.ports import SYSTEM_CLOCK
from pagefleet.jobs.record import JobMessage


def message(job_id: str) -> JobMessage:
    return JobMessage(tenant_id="t", job_id=job_id, attempt=0, correlation_id="c", pool="standard")


def long_poll(queue: LongPollQueue, received: list[str]) -> threading.Thread:
    """A receive waiting up to 60 s on a thread, started; what it gets goes to ``received``."""
    waiting = threading.Event()

    def receive() -> None:
        waiting.set()
        got = queue.receive("standard", max_messages=1, wait_seconds=60, visibility=30)
        received.extend(m.message.job_id for m in got if m.message)

    reader = threading.Thread(target=receive)
    reader.start()
    waiting.wait()
    return reader


def test_each_call_to_a_delayed_fake_is_counted_by_method_and_answered_by_the_fake() -> None:
    counts: dict[str, int] = {}
    queue = FakeQueue(SYSTEM_CLOCK)
    delayed = Delayed(queue, 0.0, counts)
    delayed.send(message("j1"))
    delayed.send(message("j2"))
    got = delayed.receive("standard", max_messages=10, wait_seconds=0, visibility=30)
    assert [m.message.job_id for m in got if m.message] == ["j1", "j2"]
    assert counts == {"FakeQueue.send": 2, "FakeQueue.receive": 1}


def test_a_receive_on_an_empty_queue_waits_for_the_next_send() -> None:
    counts: dict[str, int] = {}
    inner = FakeQueue(SYSTEM_CLOCK)
    queue = LongPollQueue(inner, Delayed(inner, 0.0, counts))
    received: list[str] = []
    reader = long_poll(queue, received)
    queue.send(message("late"))
    reader.join()
    assert received == ["late"]
    # An empty queue with no wait answers at once, empty.
    assert queue.receive("standard", max_messages=1, wait_seconds=0, visibility=30) == []


def test_a_closed_queue_looks_empty_until_opened_and_then_wakes_its_long_poll() -> None:
    """The bench submits a segment's jobs (the API's work) with the queue closed to the
    worker, so none of that work shares the timed run."""
    inner = FakeQueue(SYSTEM_CLOCK)
    queue = LongPollQueue(inner, Delayed(inner, 0.0, {}))
    queue.open.clear()
    queue.send(message("queued"))
    assert queue.receive("standard", max_messages=1, wait_seconds=0, visibility=30) == []
    received: list[str] = []
    reader = long_poll(queue, received)
    reader.join(0.3)
    assert reader.is_alive() and received == []  # still waiting, the job queued unseen
    queue.opened()
    reader.join(10)
    assert received == ["queued"]
