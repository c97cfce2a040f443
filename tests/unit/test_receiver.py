"""Which of a pool's priority queues a slot takes its next job from (no AWS, no browser)."""

from __future__ import annotations

import threading
from typing import Any

from browser_task.slot.receiver import NORMAL_FIRST, Receiver
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.specs.resources import queue_key

HIGH, NORMAL, LOW = (queue_key("standard", p) for p in ("high", "normal", "low"))


class Queues:
    """Short polls only: each queue a list of job names, taken from the front."""

    def __init__(self, **jobs: list[str]) -> None:
        self.jobs = {HIGH: jobs.get("high", []), NORMAL: jobs.get("normal", []), LOW: []}
        self.jobs[LOW] = jobs.get("low", [])
        self.polls = 0

    def receive(self, key: str, **_: Any) -> list[ReceivedMessage]:
        self.polls += 1
        if not self.jobs[key]:
            return []
        name = self.jobs[key].pop(0)
        return [ReceivedMessage(None, name, name, 1, 0, "", queue=key)]

    def change_visibility(self, *_: Any) -> None:
        return None


def take(receiver: Receiver, n: int) -> list[str]:
    return [receiver.receive()[0].receipt_handle for _ in range(n)]


def receiver(queues: Queues) -> Receiver:
    return Receiver(
        queues,  # type: ignore[arg-type]
        "standard",
        visibility=30,
        wait_seconds=0,
        stopping=lambda: False,
    )


def test_high_jobs_go_first_whatever_the_idle_polls_before() -> None:
    for idle_polls in range(6):
        queues = Queues()
        slot = receiver(queues)
        for _ in range(idle_polls):
            assert slot.receive() == []
        queues.jobs[NORMAL] += ["n1", "n2"]
        queues.jobs[HIGH] += ["h1", "h2"]
        assert take(slot, 4) == ["h1", "h2", "n1", "n2"], idle_polls


def test_a_flood_of_high_jobs_does_not_starve_normal_or_low_ones() -> None:
    high = [f"h{n}" for n in range(30)]
    queues = Queues(high=high, normal=["n1", "n2"], low=["l1"])
    taken = take(receiver(queues), 12)
    assert taken[NORMAL_FIRST - 1] == "n1"  # after NORMAL_FIRST - 1 high jobs
    assert {"n1", "n2", "l1"} <= set(taken)


def test_an_empty_lower_queue_is_not_passed_over() -> None:
    queues = Queues(high=[f"h{n}" for n in range(8)])
    slot = receiver(queues)
    assert take(slot, 8) == [f"h{n}" for n in range(8)]
    queues.jobs[NORMAL].append("n1")
    queues.jobs[HIGH].append("h8")
    assert take(slot, 2) == ["h8", "n1"]  # normal was looked at (empty) every few jobs


class LongPolls(Queues):
    """Long polls that wait for a job on their queue (or until closed), as SQS's do."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()
        self.short_polls = 0
        self.waiting = dict.fromkeys((HIGH, NORMAL, LOW), 0)
        self.closed = False

    def receive(self, key: str, **kw: Any) -> list[ReceivedMessage]:
        with self.changed:
            if not kw["wait_seconds"]:
                self.short_polls += 1
                self.changed.notify_all()
                return super().receive(key)
            self.waiting[key] += 1
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.jobs[key] or self.closed, kw["wait_seconds"])
            self.waiting[key] -= 1
            return super().receive(key)

    def add(self, key: str, *names: str) -> None:
        with self.changed:
            self.jobs[key] += names
            self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()


def test_a_burst_on_an_idle_worker_fills_every_waiting_slot_at_once() -> None:
    """Two slots wait on the shared long polls; two jobs arrive together. The poll that
    gave the first is started again for the second slot: it does not wait for the other
    queues' polls to end (a whole poll period: 10 s on AWS)."""
    queues = LongPolls()
    slot = Receiver(
        queues,  # type: ignore[arg-type]
        "standard",
        visibility=30,
        wait_seconds=5,
        stopping=lambda: False,
    )
    got: list[list[str]] = []

    def wait_for_a_job() -> None:
        got.append([m.receipt_handle for m in slot.receive()])

    slots = [threading.Thread(target=wait_for_a_job) for _ in range(2)]
    try:
        for thread in slots:
            thread.start()
        with queues.changed:  # both slots have looked at every queue; one poll on each
            assert queues.changed.wait_for(
                lambda: queues.short_polls == 6 and all(queues.waiting.values()), 10
            )
        queues.add(NORMAL, "n1", "n2")
        for thread in slots:
            thread.join(10)
        assert sorted(got) == [["n1"], ["n2"]]
        # The high and low queues' polls are still waiting: nobody waited for them.
        assert queues.waiting[HIGH] == 1
        assert queues.waiting[LOW] == 1
    finally:
        queues.close()
