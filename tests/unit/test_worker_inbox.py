"""The worker's inbox deletes the wake-ups it handed on later, with others: ten a request, or
those that waited a second when the next receive returns, never one request per wake-up."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from browser_task.run.inbox import DELETE_WITHIN_S, WorkerInbox
from devstack.fakes.session_inbox import FakeInboxRegistry, FakeSessionInbox
from pagefleet.browsing.inbox import Delivery, Wakeup
from pagefleet.jobs.models import new_ulid

NAME = "inbox-w1"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def wakeup(command_id: str, session_id: str = "s1") -> Wakeup:
    return Wakeup(id=new_ulid(), tenant_id="t", session_id=session_id, command_id=command_id)


def made(clock: Clock) -> tuple[WorkerInbox, FakeSessionInbox]:
    inbox = FakeSessionInbox()
    inbox.make(NAME)
    return WorkerInbox(inbox, FakeInboxRegistry(), NAME, monotonic=clock), inbox


def test_a_wakeup_is_handed_on_at_once_and_deleted_with_the_next_ones() -> None:
    clock = Clock()
    worker, inbox = made(clock)
    mailbox = worker.open("t", "s1")
    inbox.send(NAME, wakeup("c1"))
    worker.take(inbox.receive(NAME, wait_s=0))
    routed = asyncio.run(mailbox.get(0))
    assert routed is not None and routed.command_id == "c1"
    assert inbox.delete_calls == []  # not on the command's path
    assert inbox.in_flight(NAME) == 1

    clock.now += DELETE_WITHIN_S / 2
    inbox.send(NAME, wakeup("c2"))
    worker.take(inbox.receive(NAME, wait_s=0))
    assert inbox.delete_calls == []  # the first has not waited its second yet

    clock.now += DELETE_WITHIN_S / 2
    worker.take([])  # the next receive returned (a long poll's end): both are due
    assert [len(call) for call in inbox.delete_calls] == [2]
    assert inbox.in_flight(NAME) == 0


def test_ten_waiting_deletes_share_one_request_at_once() -> None:
    clock = Clock()
    worker, inbox = made(clock)
    worker.open("t", "s1")
    for i in range(12):
        inbox.send(NAME, wakeup(f"c{i}"))
    worker.take(inbox.receive(NAME, wait_s=0))  # ten
    worker.take(inbox.receive(NAME, wait_s=0))  # two
    assert [len(call) for call in inbox.delete_calls] == [10]
    assert inbox.in_flight(NAME) == 2


def test_a_message_that_is_not_a_wakeup_is_deleted_not_routed() -> None:
    clock = Clock()
    worker, inbox = made(clock)
    worker.take([Delivery(wakeup=None, receipt="r-junk")])
    clock.now += DELETE_WITHIN_S
    worker.take([])
    assert inbox.delete_calls == [["r-junk"]]
    assert worker.dropped == 0


class RefusingDeletes(FakeSessionInbox):
    def delete(self, name: str, receipts: list[str]) -> None:
        raise RuntimeError("throttled")


def test_a_failed_delete_stops_nothing() -> None:
    """A wake-up left undeleted comes back after it was hidden, and runs nothing twice."""
    clock = Clock()
    inbox: Any = RefusingDeletes()
    inbox.make(NAME)
    worker = WorkerInbox(inbox, FakeInboxRegistry(), NAME, monotonic=clock)
    mailbox = worker.open("t", "s1")
    inbox.send(NAME, wakeup("c1"))
    worker.take(inbox.receive(NAME, wait_s=0))
    clock.now += DELETE_WITHIN_S
    inbox.send(NAME, wakeup("c2"))
    worker.take(inbox.receive(NAME, wait_s=0))  # the delete fails; routing goes on
    got = [asyncio.run(mailbox.get(0)), asyncio.run(mailbox.get(0))]
    assert [w.command_id for w in got if w] == ["c1", "c2"]


def test_a_session_waiting_for_its_next_wakeup_is_handed_it_from_the_inbox_thread() -> None:
    """No thread waits in the mailbox: the loop awaits it, the put wakes it."""
    worker, _ = made(Clock())
    mailbox = worker.open("t", "s1")

    async def waited() -> tuple[Wakeup | None, Wakeup | None, float]:
        began = time.monotonic()
        threading.Timer(0.05, worker.route, [wakeup("c1")]).start()
        got = await mailbox.get(30)
        return got, await mailbox.get(0.05), time.monotonic() - began

    got, nothing, took = asyncio.run(waited())
    assert got is not None and got.command_id == "c1"
    assert nothing is None  # none more: the wait ends at its timeout
    assert took < 30  # handed over as routed, not found at the wait's end


def test_a_put_for_a_wait_whose_loop_closed_stops_nothing() -> None:
    """A session's loop gone while its wait was pending (a worker stopping): the inbox's
    thread hands the wake-up on without raising, and keeps it."""
    worker, _ = made(Clock())
    mailbox = worker.open("t", "s1")
    loop = asyncio.new_event_loop()
    waiting = loop.create_task(mailbox.get(30))
    loop.run_until_complete(asyncio.sleep(0.01))  # the get waits on its future now
    loop.close()  # and never resumes
    worker.route(wakeup("c1"))  # does not raise on the inbox's thread
    got = asyncio.run(mailbox.get(0))
    assert got is not None and got.command_id == "c1"
    assert not waiting.done()
