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
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from browser_task.errors import first_line
from pagefleet.browsing.inbox import InboxRegistry, SessionInbox, Wakeup

# A long poll waits at most this (a stopping worker's poll thread lingers this long).
POLL_S = 10
# The registry entry is renewed this often and promises this long: a worker dead for
# ALIVE_FOR_S has its inbox swept.
RENEW_EVERY_S = 60.0
ALIVE_FOR_S = 180.0
RETRY_AFTER_S = 1.0
log = logging.getLogger("browser_task.run.inbox")


class Mailbox:
    """One session's wake-ups, as the inbox's thread routes them."""

    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self._items: deque[Wakeup] = deque()
        self._changed = threading.Condition()

    def put(self, wakeup: Wakeup) -> None:
        with self._changed:
            self._items.append(wakeup)
            self._changed.notify_all()

    def get(self, timeout_s: float) -> Wakeup | None:
        """The next wake-up; None after ``timeout_s`` without one."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._items:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._items.popleft()


class WorkerInbox:
    def __init__(
        self,
        inbox: SessionInbox,
        registry: InboxRegistry,
        name: str,
        *,
        clock: Callable[[], float] = time.time,
        poll_s: int = POLL_S,
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
                # Routed as received, before their deletes (pagefleet.browsing.inbox).
                self.inbox.receive(self.name, wait_s=self._poll_s, taken=self._route_all)
            except Exception as exc:
                log.warning("reading the inbox failed: %s", first_line(str(exc)))
                self._stop.wait(RETRY_AFTER_S)

    def _route_all(self, wakeups: list[Wakeup]) -> None:
        for wakeup in wakeups:
            self.route(wakeup)

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
