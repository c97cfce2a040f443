"""The local timer that plays EventBridge rate() for the sweeper keeps ticking after errors;
a stack's parts stop together."""

from __future__ import annotations

import functools
import threading
from types import SimpleNamespace

from devstack.pollers import Timer, stop_together


def test_timer_calls_its_action_repeatedly_and_survives_failures() -> None:
    calls: list[int] = []
    enough = threading.Event()

    def action() -> None:
        calls.append(1)
        if len(calls) >= 3:
            enough.set()
        if len(calls) == 1:
            raise RuntimeError("first run fails")

    timer = Timer("test", 0.01, action).start()
    try:
        assert enough.wait(10)
    finally:
        timer.stop()
    assert timer.failures == 1
    assert timer.runs >= 2


def test_a_stopped_dead_letter_poller_polls_no_further_dlq(monkeypatch) -> None:
    """stop() during one DLQ's long poll ends the poller there: polling the other five
    first (2 s each) outlasted stop()'s join and kept the thread calling a stopped moto."""
    from devstack.pollers import DeadLetterPoller
    from pagefleet.runtime import RUNTIME

    dlqs = {f"pool-{n}": f"http://127.0.0.1:1/dlq-{n}" for n in range(6)}
    poller = DeadLetterPoller(dlqs, function=lambda event: {})  # type: ignore[arg-type]
    polled: list[str] = []

    class StubSqs:
        meta = SimpleNamespace(region_name="us-east-1")

        def get_queue_attributes(self, QueueUrl: str, **_: object) -> dict[str, object]:
            return {"Attributes": {"QueueArn": f"arn:aws:sqs:us-east-1:1:{QueueUrl[-5:]}"}}

        def receive_message(self, QueueUrl: str, **_: object) -> dict[str, object]:
            polled.append(QueueUrl)
            poller._stop.set()  # stop() arrives while this long poll waits
            return {}

    monkeypatch.setattr(RUNTIME, "client", lambda service: StubSqs())
    poller._run()  # on this thread: returns once the poller sees it was stopped

    assert polled == [dlqs["pool-0"]]


def test_parts_stopped_together_wait_for_each_other_not_in_turn() -> None:
    # Each stop waits until every stop has begun: called one after another, the first would
    # wait forever (and the barrier's timeout fails it).
    barrier = threading.Barrier(3, timeout=10)
    ended: list[int] = []

    def stop(n: int) -> None:
        barrier.wait()
        ended.append(n)

    stop_together(functools.partial(stop, n) for n in range(3))
    assert sorted(ended) == [0, 1, 2]


def test_a_failing_stop_does_not_keep_the_others_from_running() -> None:
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("part already gone")

    stop_together([broken, lambda: ran.append("next")])
    assert ran == ["next"]
