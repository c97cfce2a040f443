"""Receiving from a pool's queues: high priority first, without starving the rest.

SQS has no priorities, so a pool has a queue per priority (``pagefleet.resources``). A slot
that wants a job first short-polls the queues in priority order (most turns high, normal,
low; every few turns normal or low first, so a flood of high jobs cannot starve them). When
all are empty, the worker keeps ONE long poll per queue in flight, shared by its slots: a
message on any queue reaches a waiting slot as soon as it arrives, and an idle worker makes
a handful of requests per poll period, not one per slot per queue.

A long poll that returns a message nobody is waiting for any more (two queues answered at
once) is kept here for the next slot, its visibility refreshed if it waited long, and
handed back to the queue when the worker stops.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable

from pagefleet.ports import JobQueue, ReceivedMessage
from pagefleet.resources import queues_of_pool

# Every NORMAL_FIRST-th turn starts with the normal queue, every LOW_FIRST-th with low.
NORMAL_FIRST = 4
LOW_FIRST = 10
# A message kept this long waiting for a slot gets its visibility (the lease) renewed.
REFRESH_AFTER_S = 10.0


class Receiver:
    def __init__(
        self,
        queue: JobQueue,
        pool: str,
        *,
        visibility: int,
        wait_seconds: int,
        stopping: Callable[[], bool],
    ) -> None:
        self._queue = queue
        self._keys = [spec.key for spec in queues_of_pool(pool)]  # high, normal, low
        self._visibility = visibility
        self._wait = wait_seconds
        self._stopping = stopping
        self._turns = itertools.count(1)
        self._ready = threading.Condition()
        self._kept: list[tuple[float, ReceivedMessage]] = []
        self._polling: set[str] = set()

    @property
    def queues(self) -> list[str]:
        return list(self._keys)

    def order(self, turn: int) -> list[str]:
        high, normal, low = self._keys
        if turn % LOW_FIRST == 0:
            return [low, high, normal]
        if turn % NORMAL_FIRST == 0:
            return [normal, high, low]
        return [high, normal, low]

    def receive(self) -> list[ReceivedMessage]:
        """One message for a slot (or none after a poll period); blocking."""
        kept = self._take_kept()
        if kept is not None:
            return [kept]
        for key in self.order(next(self._turns)):
            found = self._queue.receive(
                key, max_messages=1, wait_seconds=0, visibility=self._visibility
            )
            if found:
                return found
        return self._wait_for_one()

    def _wait_for_one(self) -> list[ReceivedMessage]:
        with self._ready:
            for key in self._keys:
                if key not in self._polling:
                    self._polling.add(key)
                    threading.Thread(
                        target=self._long_poll, args=(key,), name=f"poll-{key}", daemon=True
                    ).start()
            deadline = time.monotonic() + self._wait + 1
            while not self._kept and self._polling and not self._stopping():
                if not self._ready.wait(timeout=max(0.0, deadline - time.monotonic())):
                    break
        kept = self._take_kept()
        return [kept] if kept is not None else []

    def _long_poll(self, key: str) -> None:
        found: list[ReceivedMessage] = []
        try:
            found = self._queue.receive(
                key, max_messages=1, wait_seconds=self._wait, visibility=self._visibility
            )
        except Exception:
            time.sleep(1)  # the caller's next turn polls again; do not spin on an outage
        if found and self._stopping():
            for message in found:  # nobody will take it: back to its queue at once
                with contextlib.suppress(Exception):
                    self._queue.change_visibility(message.queue, message.receipt_handle, 0)
            found = []
        with self._ready:
            self._polling.discard(key)
            now = time.monotonic()
            self._kept += [(now, m) for m in found]
            self._ready.notify_all()

    def _take_kept(self) -> ReceivedMessage | None:
        with self._ready:
            if not self._kept:
                return None
            # Highest priority first among what is kept.
            self._kept.sort(key=lambda item: self._keys.index(item[1].queue))
            since, message = self._kept.pop(0)
        if time.monotonic() - since > REFRESH_AFTER_S:
            with contextlib.suppress(Exception):
                self._queue.change_visibility(
                    message.queue, message.receipt_handle, self._visibility
                )
        return message

    def hand_back(self) -> None:
        """Stopping: what is kept goes back to its queue at once."""
        with self._ready:
            kept, self._kept = self._kept, []
        for _, message in kept:
            with contextlib.suppress(Exception):
                self._queue.change_visibility(message.queue, message.receipt_handle, 0)
