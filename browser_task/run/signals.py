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
    """What a run tells the slot it runs in: its workflow ended (the slot looks ahead), and
    its browser work is over (``released``: the context is closed)."""

    workflow_ended: Callable[[], None] = lambda: None
    released: asyncio.Event = field(default_factory=asyncio.Event)
