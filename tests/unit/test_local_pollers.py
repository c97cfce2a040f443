"""The local timer that plays EventBridge rate() for the sweeper keeps ticking after errors."""

from __future__ import annotations

import threading

from devstack.pollers import Timer


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
