"""Pollers that play AWS event sources on the local stack.

On AWS, EventBridge ``rate(1 minute)`` invokes the sweeper. Locally a timer thread calls
the same service function. (DLQ -> dead_letters and stream -> live pollers join here when
those functions exist.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pagefleet.jobs.service import JobServices, requeue_unqueued

log = logging.getLogger("pagefleet.local")


class Timer:
    """Calls ``action`` every ``interval_s`` on a daemon thread until stopped.

    A failing run is logged and the timer keeps going, as a scheduled Lambda would be
    invoked again on the next tick.
    """

    def __init__(self, name: str, interval_s: float, action: Callable[[], object]) -> None:
        self.name = name
        self.interval_s = interval_s
        self._action = action
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"timer-{name}", daemon=True)
        self.runs = 0
        self.failures = 0

    def start(self) -> Timer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._action()
                self.runs += 1
            except Exception:
                self.failures += 1
                log.exception("timer %s failed", self.name)

    def stop(self, timeout: float = 5) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


def sweeper_timer(svc: Callable[[], JobServices], interval_s: float = 60) -> Timer:
    """The sweeper's enqueue-failure duty: re-send jobs recorded but never queued."""

    def sweep() -> int:
        count = requeue_unqueued(svc())
        if count:
            log.info("sweeper re-enqueued %d job(s)", count)
        return count

    return Timer("sweeper", interval_s, sweep)
