"""Which of a pool's priority queues a slot takes its next job from (no AWS, no browser)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from browser_task.slot.receiver import NORMAL_FIRST, REFRESH_AFTER_S, Receiver
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


class Overlapping(Queues):
    """Short polls that tell whether the normal queue's began while the high one's was out."""

    def __init__(self, **jobs: list[str]) -> None:
        super().__init__(**jobs)
        self.normal_started = threading.Event()
        self.overlapped: list[bool] = []
        self.given_back: list[str] = []

    def receive(self, key: str, **kw: Any) -> list[ReceivedMessage]:
        if key == NORMAL:
            self.normal_started.set()
        if key == HIGH:
            # Sequential polls would look at normal only after this one returns.
            self.overlapped.append(self.normal_started.wait(5))
            self.normal_started.clear()
        return super().receive(key)

    def change_visibility(self, key: str, handle: str, seconds: int) -> None:
        self.given_back.append(handle)


def test_a_normal_job_costs_one_round_trip_when_the_high_queue_was_empty() -> None:
    queues = Overlapping(normal=["n1", "n2"])
    slot = receiver(queues)
    assert take(slot, 2) == ["n1", "n2"]
    assert queues.overlapped == [True, True]  # high and normal were polled at once
    assert queues.polls == 4  # and no more polls than one after the other


def test_a_job_the_paired_poll_kept_waits_for_the_high_jobs_after_it() -> None:
    queues = Queues(high=["h1"], normal=["n1", "n2"])
    slot = receiver(queues)
    assert take(slot, 1) == ["h1"]  # both polls gave a job: n1 is kept
    queues.jobs[HIGH] += ["h2", "h3"]
    assert take(slot, 4) == ["h2", "h3", "n1", "n2"]
    assert queues.jobs == {HIGH: [], NORMAL: [], LOW: []}


def test_a_flood_of_high_jobs_costs_one_poll_a_job() -> None:
    queues = Queues(high=[f"h{n}" for n in range(3)])
    slot = receiver(queues)
    assert take(slot, 3) == ["h0", "h1", "h2"]
    # The first look pairs high with normal (high was empty before); once high gave a job
    # it is polled alone until found empty.
    assert queues.polls == 2 + 1 + 1


def test_a_kept_job_goes_back_to_its_queue_when_the_worker_stops() -> None:
    queues = Overlapping(high=["h1"], normal=["n1"])
    slot = receiver(queues)
    assert take(slot, 1) == ["h1"]
    slot.hand_back()
    assert queues.given_back == ["n1"]
    queues.normal_started.set()  # high is polled alone now: it has nothing to wait for
    assert slot.receive() == []  # nothing kept any more


class Renewals(Queues):
    """Short polls; each change of visibility (a renewal) recorded."""

    def __init__(self, **jobs: list[str]) -> None:
        super().__init__(**jobs)
        self.renewed: list[str] = []

    def change_visibility(self, key: str, handle: str, seconds: int) -> None:
        self.renewed.append(handle)


def test_a_spare_passed_over_again_keeps_its_age_and_is_renewed_when_it_waited_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spare behind a run of high jobs is given out with its visibility renewed once it
    has waited REFRESH_AFTER_S in all, however many times the high queue went first."""
    now = [0.0]
    monkeypatch.setattr("browser_task.slot.receiver.time.monotonic", lambda: now[0])
    queues = Renewals(high=["h1"], normal=["n1"])
    slot = receiver(queues)
    assert take(slot, 1) == ["h1"]  # n1 kept as a spare at 0 s
    now[0] = REFRESH_AFTER_S * 0.6
    queues.jobs[HIGH].append("h2")
    assert take(slot, 1) == ["h2"]  # the spare waits again
    assert queues.renewed == []
    now[0] = REFRESH_AFTER_S * 1.2
    assert take(slot, 1) == ["n1"]
    assert queues.renewed == ["n1"]
