"""A share of events, counted rather than drawn, for the embedded AWS's rules that make some
requests behave as AWS sometimes does (a message delivered twice, a new item missed by a
read): exactly one event in ``1 / share`` is chosen, so a run repeats."""

from __future__ import annotations

import threading


class CountedShare:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen = 0
        self._chosen = 0

    def next(self, share: float) -> bool:
        """Whether this event is one of the ``share`` chosen (counted from the last reset)."""
        if share <= 0:
            return False
        with self._lock:
            self._seen += 1
            if self._chosen < int(self._seen * share):
                self._chosen += 1
                return True
            return False

    @property
    def chosen(self) -> int:
        """How many events were chosen since the last reset."""
        with self._lock:
            return self._chosen

    def reset(self) -> None:
        with self._lock:
            self._seen = self._chosen = 0
