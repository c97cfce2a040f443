"""Runs that wait for a person outside their slot.

An ``await_human`` step parks its job for up to an hour. Held in its slot, a waiting job
makes the worker one job smaller for that long, and a worker whose slots all wait takes no
job at all. So a waiting job asks to leave its slot (``SlotSignals.leave_slot``): the slot
takes its next job while the run, its browser context open, goes on outside it until that
context is closed, and is then settled as any run is. What bounds it is memory: each such
context is a Chromium context beside the slots' own, so a worker lets at most
``max_waiting_contexts`` out at once (docs/decisions.md, 2026-12-05); past that, a waiting
job keeps its slot, as it always did. A run that resumes outside its slot keeps its place
here until its context closes, so the worker's contexts never pass its slots plus the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any


class OutsideSlots:
    """The runs a worker let out of their slots, at most ``cap`` at once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0  # runs outside a slot whose browser context is still open
        self.tasks: set[asyncio.Task[None]] = set()

    def leave(self, left: asyncio.Event, *, stopping: bool) -> bool:
        """A run asks to leave its slot (``left`` tells the slot): True when it may."""
        if stopping or self.held >= self.cap:
            return False
        self.held += 1
        left.set()
        return True

    def stayed(self, left: asyncio.Event) -> None:
        """The run's browser work ended before its slot let it go: its place is free."""
        if left.is_set():
            self.held -= 1

    def carry(
        self, work: asyncio.Future[None], settle: Coroutine[Any, Any, None]
    ) -> asyncio.Task[None]:
        """Go on with a run outside its slot: its browser work (recorded), then its
        settling (outcome, uploads); its place is free once its context is closed."""

        async def outside() -> None:
            try:
                with contextlib.suppress(Exception):  # the run's own outcome tells
                    await work
            finally:
                self.held -= 1
            await settle

        task = asyncio.create_task(outside(), name="waiting outside its slot")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task
