"""What a run and the slot it runs in tell each other: the job's lease, the slot's signals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class HeldLease(Protocol):
    """The job's lease as the run sees it (``browser_task.slot.leases.LeaseKeeper``): set
    ``lost`` when another attempt took the job."""

    lost: asyncio.Event


@dataclass
class SlotSignals:
    """What a run tells the slot it runs in: its workflow ended (the slot looks ahead), its
    browser work is over (``released``: the context is closed), or it waits for a person
    and asks to leave the slot meanwhile (``leave_slot``: True when the worker let it, its
    cap of waiting contexts allowing; the slot then takes its next job while this run,
    context open, goes on outside it)."""

    workflow_ended: Callable[[], None] = lambda: None
    released: asyncio.Event = field(default_factory=asyncio.Event)
    leave_slot: Callable[[], bool] = lambda: False
