"""What a worker is made of: its parts, built whole by ``browser_task.__main__.build_worker``
and handed to ``browser_task.slot.worker.Worker``, and the id it goes by."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from browser_task.browser.pool import BrowserPool
from browser_task.egress.breakers import BreakerGate
from browser_task.observe.health import Liveness
from browser_task.observe.task_protection import TaskProtection
from browser_task.observe.telemetry import JobLog, WorkerMetrics
from browser_task.run.inbox import WorkerInbox
from browser_task.run.runner import JobRunner
from browser_task.slot.ahead import LaterHooks
from browser_task.slot.completion import Completion
from browser_task.slot.deletes import GatheredDeletes
from browser_task.slot.leases import LeaseWatch
from browser_task.slot.receiver import Receiver
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.live.ports import EventStore


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class WorkerParts:
    """What a worker is made of, built whole by ``browser_task.__main__.build_worker``."""

    worker_id: str
    # The worker's own lifecycle over the process's store and queue: the claimed message's
    # delete runs on ``later`` (browser_task.slot.ahead).
    lifecycle: Lifecycle
    later: ThreadPoolExecutor
    # The lifecycle's queue: its deletes sent ten a request (browser_task.slot.deletes).
    deletes: GatheredDeletes
    # The lifecycle's hooks: its claims told a tenant's together (browser_task.slot.ahead).
    hooks: LaterHooks
    browsers: BrowserPool
    runner: JobRunner
    completion: Completion
    receiver: Receiver
    lease_watch: LeaseWatch
    breakers: BreakerGate
    events: EventStore
    protection: TaskProtection
    metrics: WorkerMetrics
    liveness: Liveness
    log: JobLog
    clock: Callable[[], float]
    # Set from any thread (a signal, a test): receive threads hand back late messages.
    stop_flag: threading.Event
    # Set when the drain period is over: the running jobs are handed back.
    abort: asyncio.Event
    # Browser sessions' wake-ups to this worker (None: it takes no sessions); also the
    # runner's, which routes them to the sessions it runs.
    inbox: WorkerInbox | None = None
