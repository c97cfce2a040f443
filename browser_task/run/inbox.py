"""This worker's command inbox: made at start, polled by one thread, wake-ups routed to the
session each names, removed at stop (pagefleet.browsing.inbox); a taken-over job's takeover
and input wake-ups go to its run's takeover (browser_task.run.takeover), session or not.

The inbox is usable before ``start`` returns, and the worker claims no session before: a
session's job names its worker (the claim's lease owner), the API sends wake-ups to that
worker's inbox, and this thread hands each to the session loop holding the session. A
wake-up for a session this worker does not hold (it ended; a stale copy) or naming another
tenant is dropped: it carries ids only, and the loop reads the command from the ledger with
the session's tenant's credentials. While it runs, the worker renews its inbox's entry in
the registry; the sweeper deletes an inbox whose entry ran out (a killed worker's).

Wake-ups are deleted after they are handed on, gathered: ten a request, or those that waited
``DELETE_WITHIN_S`` when the next receive returns (within a long poll's ``POLL_S`` then, far
inside the ``HIDDEN_S`` they were received hidden for). A delete sent at once, each alone,
ran on the worker while the command it had woken was claimed: ~2 ms more on each step's
path (bench/session_overhead.py), for a request ten wake-ups now share. At stop, what still
waits goes with the inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from browser_task.errors import first_line
from browser_task.gathered import Gathered
from pagefleet.browsing.inbox import Delivery, InboxRegistry, SessionInbox, Wakeup
from pagefleet.jobs.ports import SQS_BATCH_MAX

# A long poll waits at most this (a stopping worker's poll thread lingers this long).
POLL_S = 10
# The registry entry is renewed this often and promises this long: a worker dead for
# ALIVE_FOR_S has its inbox swept.
RENEW_EVERY_S = 60.0
ALIVE_FOR_S = 180.0
RETRY_AFTER_S = 1.0
# A wake-up's delete waits this long for others to share its request.
DELETE_WITHIN_S = 1.0
log = logging.getLogger("browser_task.run.inbox")


class Mailbox:
    """One session's wake-ups: put by the inbox's thread, awaited on the session's loop. No
    thread waits for them: the put hands the loop its next wake-up directly (a thread
    blocked in a wait for each open session held one of the worker's I/O threads, and its
    wake-up crossed one thread more on its way to the claim, ~0.7 ms a step)."""

    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self._items: deque[Wakeup] = deque()
        self._lock = threading.Lock()
        # The loop waiting for the next put, and the future it waits on (None: nobody).
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None

    def put(self, wakeup: Wakeup) -> None:
        with self._lock:
            self._items.append(wakeup)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, future = waiter
            # A loop closed meanwhile (its session ended) takes nothing: the inbox goes on.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future)

    async def get(self, timeout_s: float) -> Wakeup | None:
        """The next wake-up; None after ``timeout_s`` without one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
                left = deadline - loop.time()
                if left <= 0:
                    return None
                future: asyncio.Future[None] = loop.create_future()
                self._waiter = (loop, future)
            try:
                await asyncio.wait_for(future, left)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    if self._waiter is not None and self._waiter[1] is future:
                        self._waiter = None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class WorkerInbox:
    def __init__(
        self,
        inbox: SessionInbox,
        registry: InboxRegistry,
        name: str,
        *,
        clock: Callable[[], float] = time.time,
        poll_s: int = POLL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inbox = inbox
        self.registry = registry
        self.name = name
        self._clock = clock
        self._poll_s = poll_s
        self._mailboxes: dict[str, Mailbox] = {}
        # Each running job's takeover (any job, a session or not): told of its wake-ups.
        self._takeovers: dict[str, tuple[str, Callable[[Wakeup], None]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewed = 0.0
        self._deletes: Gathered[str, str] = Gathered(
            self._delete, within_s=DELETE_WITHIN_S, full=SQS_BATCH_MAX, monotonic=monotonic
        )
        self.dropped = 0  # wake-ups for sessions this worker does not hold

    def start(self) -> None:
        """Register, make the inbox (usable when this returns) and start routing."""
        self._renew()  # before the queue exists: the sweeper never sees it unregistered
        self.inbox.make(self.name)
        self._thread = threading.Thread(target=self._route, name="inbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop routing, delete the inbox and its entry (nothing is left behind)."""
        self._stop.set()
        with contextlib.suppress(Exception):
            self.inbox.remove(self.name)
        with contextlib.suppress(Exception):
            self.registry.drop(self.name)

    def open(self, tenant_id: str, session_id: str) -> Mailbox:
        """The session's mailbox, from now on fed by the inbox."""
        mailbox = Mailbox(tenant_id)
        with self._lock:
            self._mailboxes[session_id] = mailbox
        return mailbox

    def close(self, session_id: str) -> None:
        with self._lock:
            self._mailboxes.pop(session_id, None)

    def on_takeover(self, tenant_id: str, job_id: str, told: Callable[[Wakeup], None]) -> None:
        """From now on, the job's takeover and input wake-ups go to ``told`` (called on the
        inbox's thread: it must only hand them over)."""
        with self._lock:
            self._takeovers[job_id] = (tenant_id, told)

    def off_takeover(self, job_id: str) -> None:
        with self._lock:
            self._takeovers.pop(job_id, None)

    def holding(self) -> int:
        with self._lock:
            return len(self._mailboxes)

    def _renew(self) -> None:
        now = self._clock()
        self.registry.renew(self.name, until=now + ALIVE_FOR_S)
        self._renewed = now

    def _route(self) -> None:
        while not self._stop.is_set():
            try:
                if self._clock() - self._renewed >= RENEW_EVERY_S:
                    self._renew()
                self.take(self.inbox.receive(self.name, wait_s=self._poll_s))
            except Exception as exc:
                log.warning("reading the inbox failed: %s", first_line(str(exc)))
                self._stop.wait(RETRY_AFTER_S)

    def take(self, received: list[Delivery]) -> None:
        """Route what a receive brought, then gather its deletes (sending those due)."""
        for delivery in received:
            if delivery.wakeup is not None:
                self.route(delivery.wakeup)
        for delivery in received:
            self._deletes.add(self.name, delivery.receipt)
        self._deletes.flush(due_only=True)

    def _delete(self, name: str, receipts: list[str]) -> None:
        try:
            self.inbox.delete(name, receipts)
        except Exception as exc:  # a copy left behind runs nothing (the ledger's claim)
            log.warning("deleting wake-ups failed: %s", first_line(str(exc)))

    def route(self, wakeup: Wakeup) -> None:
        if wakeup.op in ("takeover", "input"):
            with self._lock:
                tenant_id, told = self._takeovers.get(wakeup.session_id, ("", None))
            if told is None or tenant_id != wakeup.tenant_id:
                self.dropped += 1
                return
            told(wakeup)
            return
        with self._lock:
            mailbox = self._mailboxes.get(wakeup.session_id)
        if mailbox is None or mailbox.tenant_id != wakeup.tenant_id:
            self.dropped += 1
            return
        mailbox.put(wakeup)
