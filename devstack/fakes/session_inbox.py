"""In memory: workers' command inboxes and their registry (pagefleet.browsing.inbox)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque

from pagefleet.browsing.inbox import HIDDEN_S, Delivery, InboxInfo, Wakeup
from pagefleet.jobs.ports import SQS_BATCH_MAX


class FakeSessionInbox:
    """Wake-ups as SQS keeps them: a received one is hidden until deleted, and comes back
    once its ``hidden_s`` has passed without a delete."""

    def __init__(self, *, clock: float | None = None) -> None:
        self._queues: dict[str, deque[Wakeup]] = {}
        # inbox -> receipt -> (time.monotonic() when it is visible again, the wake-up)
        self._hidden: dict[str, dict[str, tuple[float, Wakeup]]] = {}
        self._receipts = itertools.count(1)
        self._made: dict[str, float] = {}
        self._changed = threading.Condition()
        self._now = clock
        # Each wake-up sent is delivered this many times (SQS: at least once).
        self.copies = 1
        self.sent: list[tuple[str, Wakeup]] = []
        self.delete_calls: list[list[str]] = []  # the receipts of each delete request

    def exists(self, name: str) -> bool:
        return name in self._queues

    def make(self, name: str) -> None:
        with self._changed:
            self._queues.setdefault(name, deque())
            self._hidden.setdefault(name, {})
            self._made.setdefault(name, time.time() if self._now is None else self._now)

    def remove(self, name: str) -> None:
        with self._changed:
            self._queues.pop(name, None)
            self._hidden.pop(name, None)
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

    def receive(self, name: str, *, wait_s: int, hidden_s: int = HIDDEN_S) -> list[Delivery]:
        deadline = time.monotonic() + wait_s
        with self._changed:
            while True:
                queue, hidden = self._queues.get(name), self._hidden.get(name)
                if queue is None or hidden is None:
                    return []
                now = time.monotonic()
                for receipt, (visible_at, wakeup) in list(hidden.items()):
                    if visible_at <= now:  # not deleted in time: delivered again
                        del hidden[receipt]
                        queue.append(wakeup)
                if queue:
                    out: list[Delivery] = []
                    while queue and len(out) < SQS_BATCH_MAX:
                        receipt = f"{name}#{next(self._receipts)}"
                        wakeup = queue.popleft()
                        hidden[receipt] = (now + hidden_s, wakeup)
                        out.append(Delivery(wakeup=wakeup, receipt=receipt))
                    return out
                left = deadline - now
                if left <= 0:
                    return []
                self._changed.wait(min(left, 0.05))

    def delete(self, name: str, receipts: list[str]) -> None:
        if len(receipts) > SQS_BATCH_MAX:
            raise ValueError(f"at most {SQS_BATCH_MAX} receipts a delete, not {len(receipts)}")
        with self._changed:
            self.delete_calls.append(list(receipts))
            hidden = self._hidden.get(name, {})
            for receipt in receipts:
                hidden.pop(receipt, None)

    def in_flight(self, name: str) -> int:
        """Wake-ups received and not deleted yet."""
        with self._changed:
            return len(self._hidden.get(name, {}))

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
