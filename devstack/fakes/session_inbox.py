"""In memory: workers' command inboxes and their registry (pagefleet.browsing.inbox)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from pagefleet.browsing.inbox import InboxInfo, Wakeup


class FakeSessionInbox:
    def __init__(self, *, clock: float | None = None) -> None:
        self._queues: dict[str, deque[Wakeup]] = {}
        self._made: dict[str, float] = {}
        self._changed = threading.Condition()
        self._now = clock
        # Each wake-up sent is delivered this many times (SQS: at least once).
        self.copies = 1
        self.sent: list[tuple[str, Wakeup]] = []

    def exists(self, name: str) -> bool:
        return name in self._queues

    def make(self, name: str) -> None:
        with self._changed:
            self._queues.setdefault(name, deque())
            self._made.setdefault(name, time.time() if self._now is None else self._now)

    def remove(self, name: str) -> None:
        with self._changed:
            self._queues.pop(name, None)
            self._made.pop(name, None)
            self._changed.notify_all()

    def send(self, name: str, wakeup: Wakeup) -> bool:
        with self._changed:
            queue = self._queues.get(name)
            if queue is None:
                return False
            self.sent.append((name, wakeup))
            queue.extend([wakeup] * self.copies)
            self._changed.notify_all()
            return True

    def receive(
        self, name: str, *, wait_s: int, taken: Callable[[list[Wakeup]], None] | None = None
    ) -> list[Wakeup]:
        got = self._take(name, wait_s)
        if taken is not None and got:
            taken(got)
        return got

    def _take(self, name: str, wait_s: int) -> list[Wakeup]:
        deadline = time.monotonic() + wait_s
        with self._changed:
            while True:
                queue = self._queues.get(name)
                if queue is None:
                    return []
                if queue:
                    taken = list(queue)[:10]
                    for _ in taken:
                        queue.popleft()
                    return taken
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._changed.wait(min(left, 0.05))

    def listed(self, prefix: str) -> list[InboxInfo]:
        with self._changed:
            return [
                InboxInfo(name=name, created_at=made)
                for name, made in self._made.items()
                if name.startswith(prefix)
            ]


class FakeInboxRegistry:
    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def renew(self, name: str, *, until: float) -> None:
        self._until[name] = until

    def drop(self, name: str) -> None:
        self._until[name] = 0

    def alive(self, name: str, *, now: float) -> bool:
        return self._until.get(name, 0) > now
