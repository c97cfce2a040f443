"""A person holding the job's page (pagefleet.jobs.takeover), as its worker sees and honours it.

The lock is read every second with the cancel flag (``cancel_watch`` hands it to ``seen``),
and at once when the inbox brings a ``takeover`` or ``input`` wake-up (``told``). While it is
held no step starts: the executor waits before each top-level step and a session before
it takes its next command (``RunContext.hold_for_person``), and the time waited is not the
job's own (the watchdog does not count it, as for ``await_human``). The person's input
batches are read from the ledger as the job's tenant, in their order, and dispatched to the
page through Chromium's ``Input`` domain, coordinates scaled from frame to viewport. When
``until`` passes without input, the worker returns the page itself: its conditional removal
wins once (over a late hand-back), and the winner writes the run event and the audit record.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from browser_task.errors import first_line
from browser_task.observe.run_events import RunEvents
from browser_task.observe.telemetry import JobLog
from pagefleet.browsing.inbox import Wakeup
from pagefleet.jobs.ports import JobStore
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.takeover import Takeover
from pagefleet.live.events import EventType
from pagefleet.tenancy.audit import audit_record
from pagefleet.tenancy.ports import AuditLog

if TYPE_CHECKING:
    from pagefleet.browsing.input_events import InputRecord, TakeoverInputs

# Batches read at once; a gap in their numbers (a batch recorded late) is waited for this
# long, then skipped (its API call failed between numbering and recording it).
READ_LIMIT = 20
GAP_WAIT_S = 5.0
# How often a step waiting for the page looks again (the signals read also tells it).
LOOK_EVERY_S = 1.0


class PageTakeover:
    def __init__(
        self,
        page: Page,
        job: JobRecord,
        store: JobStore,
        inputs: Callable[[], TakeoverInputs] | None,
        *,
        events: RunEvents | None,
        audit: AuditLog | None,
        log: JobLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._page = page
        self._tenant_id, self._job_id = job.tenant_id, job.job_id
        self._store = store
        self._inputs = inputs
        self._events = events
        self._audit = audit
        self._log = log
        self._clock = clock
        self.held: Takeover | None = None
        self._free = asyncio.Event()
        self._free.set()
        self._busy = asyncio.Lock()
        # Each recent takeover's last batch dispatched (an ended one's are dispatched too).
        self._cursors: dict[str, int] = {}
        self._gap_since: float | None = None
        self._cdp: CDPSession | None = None
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self.last_held = 0.0  # time.monotonic() when last seen held (a session's idle)
        self.dispatched = 0  # input events dispatched to the page

    # --- what tells it -------------------------------------------------------------------
    def told(self, wakeup: Wakeup) -> None:
        """A wake-up from the inbox's thread: look at the lock and the inputs now."""
        self._loop.call_soon_threadsafe(self._look_soon, wakeup.takeover_id)

    def _look_soon(self, named: str | None) -> None:
        task = asyncio.create_task(self.look(named))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def look(self, named: str | None = None) -> None:
        """Read the lock (one small read) and act on it; ``named``: the takeover a wake-up
        named (its input is dispatched even if it ended since: wake-ups come in any order)."""
        try:
            signals = await asyncio.to_thread(
                self._store.run_signals, self._tenant_id, self._job_id, now=int(self._clock())
            )
        except Exception as exc:  # the next second's read tells
            self._log.warning("reading the takeover failed", error=first_line(str(exc)))
            return
        await self.seen(signals.takeover, named=named)

    async def seen(self, takeover: Takeover | None, *, named: str | None = None) -> None:
        """The lock as just read: hold the steps, dispatch new input, or let them go."""
        async with self._busy:
            now = self._clock()
            if takeover is not None and not takeover.active(now):
                if not await self._return(takeover, now):
                    return  # renewed or handed back meanwhile: the next read tells which
                takeover = None
            current = takeover.takeover_id if takeover is not None else None
            # What the person sent before handing back lands before the steps go on.
            for ended in {named, self.held.takeover_id if self.held else None} - {None, current}:
                assert ended is not None
                await self._dispatch_new(ended, wait_gaps=False)
            if takeover is None:
                if self.held is not None:
                    self._log.info("takeover ended", takeover_id=self.held.takeover_id)
                    self._renumber()
                    await self._detach()
                self.held = None
                self._free.set()
                return
            if self.held is None or self.held.takeover_id != takeover.takeover_id:
                self._log.info("taken over", takeover_id=takeover.takeover_id)
                self._renumber()
                self._gap_since = None
            self.held = takeover
            self._free.clear()
            self.last_held = time.monotonic()
            if takeover.seq > self._cursors.get(takeover.takeover_id, 0):
                await self._dispatch_new(takeover.takeover_id, wait_gaps=True)

    def _renumber(self) -> None:
        """The API numbers the takeover's events (taken, handed back) from the job's counter:
        the job's next events are numbered after them, not from what the attempt reserved."""
        if self._events is not None:
            self._events.renumber()

    # --- the steps wait ------------------------------------------------------------------
    @property
    def free(self) -> bool:
        return self._free.is_set()

    async def hold(self, *, look: bool = False) -> float:
        """Before a step: wait while a person holds the page (``look``: read the lock first,
        not only what the last second's read said); the seconds waited."""
        if look:
            await self.look()
        return await self.wait_free()

    async def wait_free(self) -> float:
        """Return once no one holds the page; the seconds waited."""
        if self._free.is_set():
            return 0.0
        began = time.monotonic()
        while not self._free.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._free.wait(), LOOK_EVERY_S)
            if not self._free.is_set():
                await self.look()  # a hand-back's wake-up may be lost: look anyway
        return time.monotonic() - began

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self._detach()

    # --- the idle return -----------------------------------------------------------------
    async def _return(self, takeover: Takeover, now: float) -> bool:
        """Its time ran out: remove it, once (whoever wins tells); False when this did not
        (it was renewed or handed back meanwhile, or the write failed)."""
        try:
            returned = await asyncio.to_thread(
                self._store.release_takeover,
                self._tenant_id,
                self._job_id,
                takeover.takeover_id,
                expired_before=int(now),
            )
        except Exception as exc:
            self._log.warning("returning the takeover failed", error=first_line(str(exc)))
            return False
        if returned is None:
            return False
        self._log.info("takeover returned after its idle time", takeover_id=takeover.takeover_id)
        if self._events is not None:
            self._events.emit(
                EventType.TAKEOVER,
                state="returned",
                holder=takeover.holder,
                message=f"no input for {takeover.idle_s} s: the page went back to the job",
            )
        if self._audit is not None:
            record = audit_record(
                takeover.holder,
                "job.takeover_returned",
                tenant_id=self._tenant_id,
                target=self._job_id,
                details={"takeover_id": takeover.takeover_id, "idle_s": takeover.idle_s},
            )
            try:
                await asyncio.to_thread(self._audit.write, record)
            except Exception as exc:
                self._log.warning("the idle return's audit record failed", error=str(exc))
        return True

    # --- input ---------------------------------------------------------------------------
    async def _dispatch_new(self, takeover_id: str, *, wait_gaps: bool) -> None:
        """The takeover's batches not dispatched yet, in order (``wait_gaps``: stop at a
        missing number, for a while: the held takeover's batch may still be recorded)."""
        if self._inputs is None:
            return
        inputs = self._inputs()
        while len(self._cursors) > 8 and takeover_id not in self._cursors:
            self._cursors.pop(next(iter(self._cursors)))
        while True:
            cursor = self._cursors.get(takeover_id, 0)
            try:
                found = await asyncio.to_thread(
                    inputs.after,
                    self._tenant_id,
                    self._job_id,
                    takeover_id,
                    seq=cursor,
                    limit=READ_LIMIT,
                )
            except Exception as exc:
                self._log.warning("reading input failed", error=first_line(str(exc)))
                return
            for record in found:
                if record.seq != cursor + 1 and wait_gaps and not self._gap_over():
                    return  # the batch before it is still being recorded
                self._gap_since = None
                await self._apply(record)
                cursor = self._cursors[takeover_id] = record.seq
            if len(found) < READ_LIMIT:
                return

    def _gap_over(self) -> bool:
        now = time.monotonic()
        if self._gap_since is None:
            self._gap_since = now
        return now - self._gap_since >= GAP_WAIT_S

    async def _apply(self, record: InputRecord) -> None:
        if self._page.is_closed():
            return
        # Imported by a takeover's first input: most jobs are never taken over.
        from browser_task.run.takeover_input import cdp_events

        try:
            cdp = await self._session()
            width, height = await self._viewport()
            sx, sy = width / record.frame.width, height / record.frame.height
            for event in record.events:
                for params in cdp_events(event, sx, sy):
                    method = params.pop("method")
                    await cdp.send(method, params)
                self.dispatched += 1
        except PlaywrightError as exc:  # the page navigated or closed: the rest is moot
            self._log.warning("input not dispatched", error=first_line(exc.message))

    async def _session(self) -> CDPSession:
        if self._cdp is None:
            self._cdp = await self._page.context.new_cdp_session(self._page)
        return self._cdp

    async def _viewport(self) -> tuple[float, float]:
        size = self._page.viewport_size
        if size is not None:
            return float(size["width"]), float(size["height"])
        seen = await self._page.evaluate("() => [window.innerWidth, window.innerHeight]")
        return float(seen[0]), float(seen[1])

    async def _detach(self) -> None:
        cdp, self._cdp = self._cdp, None
        if cdp is not None:
            with contextlib.suppress(PlaywrightError):
                await cdp.detach()
