"""Writes a worker gathers for a moment so that one request carries several.

Items are kept per key (a queue, a tenant) and handed to ``send`` together: at once when a
key has ``full`` of them, when its oldest has waited ``within_s``, and all of them when the
worker stops (``flush``). Nothing here retries: ``send`` says what a failed send leaves
behind (each user documents how its books are repaired).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

# How often the flusher looks for items that waited long enough (at most ``within_s``).
LOOK_EVERY_S = 0.25


class Gathered(Generic[K, V]):
    """Items gathered per key and sent together (``send(key, items)``, never raises)."""

    def __init__(
        self,
        send: Callable[[K, list[V]], None],
        *,
        within_s: float,
        full: int | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._within_s = within_s
        self._full = full
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # key -> (when its oldest waiting item was added, the items)
        self._waiting: dict[K, tuple[float, list[V]]] = {}

    def add(self, key: K, item: V) -> None:
        """Kept to be sent with others; sent at once (in this thread) when it makes ``full``."""
        with self._lock:
            _, items = self._waiting.setdefault(key, (self._monotonic(), []))
            items.append(item)
            full = self._full is not None and len(items) >= self._full
            if full:
                del self._waiting[key]
        if full:
            self._send(key, items)

    def flush(self, *, due_only: bool = False) -> None:
        """Send what waits (``due_only``: what has waited ``within_s``)."""
        now = self._monotonic()
        with self._lock:
            taken = {
                key: items
                for key, (since, items) in self._waiting.items()
                if not due_only or now - since >= self._within_s
            }
            for key in taken:
                del self._waiting[key]
        for key, items in taken.items():
            self._send(key, items)

    @property
    def waiting(self) -> int:
        with self._lock:
            return sum(len(items) for _, items in self._waiting.values())

    async def run_flusher(self) -> None:
        """Send each item within ``within_s`` of when it was added, until cancelled (the
        worker's stop then sends the rest with ``flush``)."""
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(min(LOOK_EVERY_S, self._within_s))
                if self.waiting:
                    await asyncio.to_thread(self.flush, due_only=True)


class GatheredPart:
    """What the worker asks of a part that gathers (its ``_gathered``): its flusher task,
    while it runs, and ``flush`` at its stop."""

    _gathered: Gathered[Any, Any]

    def flush(self, *, due_only: bool = False) -> None:
        """Send what waits (``due_only``: what has waited ``within_s``)."""
        self._gathered.flush(due_only=due_only)

    @property
    def waiting(self) -> int:
        return self._gathered.waiting

    async def run_flusher(self) -> None:
        """Send each item within ``within_s`` of when it was added, until cancelled."""
        await self._gathered.run_flusher()
