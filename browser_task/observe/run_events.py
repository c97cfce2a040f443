"""The worker's run events for one attempt: collected as they happen, written in batches.

``emit`` only appends to a buffer (it runs in Playwright's callbacks and the step loop). A
flusher writes the buffer at most once per ``flush_s`` (one write per batch, not per event:
the oldest waiting event waits at most ``flush_s``), and ``close`` writes what is left when
the attempt ends, before its outcome is written, so a follower sees the last step before
the final status. Sequence numbers are reserved from the job's counter
(``pagefleet.live.numbers``), so attempts (and a worker that lost its lease) never reuse a
number: the claim reserved the attempt's first ``RESERVE`` (and as much of the job's
allowance) in its own write, and a batch past them reserves ``RESERVE`` more beyond itself,
so the attempt's next batches take theirs without asking the store again: a plain job's
events are its puts only (docs/decisions.md, 2026-12-05 and 2026-12-06). What an attempt leaves
of its reservation is a gap in the job's numbers (followers fill gaps from the events
route, where a number never stored is skipped), and at most ``RESERVE`` of the job's
allowance; events another writer may number meanwhile (the API's takeover events) make the
attempt ask again (``renumber``), so numbers keep the order things happened in.

Bounds: at most ``max_events`` events per job (state, retry and truncated events excepted,
so a follower always learns how an attempt ended); past that, events are dropped and one
``truncated`` event per attempt says how many. Every text is masked with the job's secret
values and clipped. A failed write keeps the events for the next one (bounded); a run is
never failed by its events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.step_times import STEP_TIMES_MAX, StepTime
from pagefleet.live.events import (
    LABEL_MAX_CHARS,
    TEXT_MAX_CHARS,
    UNBOUNDED_TYPES,
    URL_MAX_CHARS,
    EventType,
    clip_text,
    events_expire_at,
    now_iso,
)
from pagefleet.live.numbers import RESERVE, EventNumbers, claimed_range
from pagefleet.live.ports import EventStore
from pagefleet.pricing import Worker
from pagefleet.specs.settings import WorkerSettings

log = logging.getLogger("browser_task.observe.run_events")

_LIMITS = {"url": URL_MAX_CHARS, "label": LABEL_MAX_CHARS, "path": LABEL_MAX_CHARS}
# Events kept in memory while writes fail, beyond which the oldest bounded ones are dropped.
BUFFER_MAX = 5000


class RunEvents:
    def __init__(
        self,
        store: EventStore,
        job: JobRecord,
        *,
        flush_s: float = 1.0,
        max_events: int = 2000,
        retention_s: int = 30 * 24 * 3600,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        pricing: Worker | None = None,
        numbers: EventNumbers | None = None,
        reserved: int = 0,
    ) -> None:
        """``numbers``: the job's counter (the store's own by default); ``reserved``: how
        many numbers ``job``'s claim reserved on it for this attempt (0: none)."""
        self.store = store
        self._numbers: EventNumbers = numbers or store.allocate
        self.tenant_id = job.tenant_id
        self.job_id = job.job_id
        self.attempt = job.attempt
        self.expires_at = events_expire_at(job, retention_s)
        self.flush_s = flush_s
        self.max_events = max_events
        self._clock = clock
        self._monotonic = monotonic
        self._mask: Callable[[str], str] = lambda text: text
        self._pending: list[dict[str, Any]] = []
        self._oldest: float | None = None
        self._last_write = float("-inf")
        self._full = False
        self._dropped = 0
        # Reserved from the job's counter and not used yet: numbers next..last, and how many
        # bounded events this attempt may still keep (see RESERVE).
        self._next_seq = 1
        self._last_seq = 0
        self._allowance = 0
        if reserved:
            self._next_seq, self._last_seq, before = claimed_range(job, reserved)
            self._allowance = max(0, min(reserved, max_events - before))
        self._renumbered = False  # set from the loop, applied by the next batch's numbering
        self._closed = False
        self._buffer_lock = threading.Lock()
        self._write_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.writes = 0
        # When each batch left (monotonic): what "at most once per flush_s" is checked on.
        self.write_times: list[float] = []
        # The worker shape a step's browser time is priced on (None: steps are not priced).
        self.pricing = pricing
        # The attempt's top-level steps as they ran, kept with its outcome (jobs.step_times).
        self.step_times: list[StepTime] = []

    # --- collecting ------------------------------------------------------------------------
    def mask_with(self, mask: Callable[[str], str]) -> None:
        """Mask text with the job's secret values from now on (once they are resolved)."""
        self._mask = mask

    def emit(self, event_type: EventType, /, **fields: Any) -> None:
        """Record an event now (``None`` fields are left out). Never raises."""
        event: dict[str, Any] = {"at": now_iso(self._clock()), "type": event_type.value}
        event["attempt"] = self.attempt
        for name, value in fields.items():
            if value is None:
                continue
            if isinstance(value, str):
                value = clip_text(self._mask(value), _LIMITS.get(name, TEXT_MAX_CHARS))
            event[name] = value
        with self._buffer_lock:
            if self._closed and event_type is not EventType.TRUNCATED:
                return
            bounded = event_type not in UNBOUNDED_TYPES
            if bounded and (self._full or self._bounded_pending() >= self.max_events):
                self._dropped += 1
                return
            self._pending.append(event)
            if len(self._pending) > BUFFER_MAX:
                self._drop_oldest_bounded()
            if self._oldest is None:
                self._oldest = self._monotonic()
        self._wakeup()

    def _wakeup(self) -> None:
        loop = self._loop
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or here is loop:
            self._wake.set()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)  # emitted from a worker thread

    def _bounded_pending(self) -> int:
        return sum(1 for e in self._pending if EventType(e["type"]) not in UNBOUNDED_TYPES)

    def _drop_oldest_bounded(self) -> None:
        for index, event in enumerate(self._pending):
            if EventType(event["type"]) not in UNBOUNDED_TYPES:
                del self._pending[index]
                self._dropped += 1
                return

    def clock(self) -> float:
        return self._clock()

    def step_ran(self, step: StepTime) -> None:
        """Keep a top-level step's time and cost for the attempt's outcome (the first
        ``STEP_TIMES_MAX``; its events have them all)."""
        if len(self.step_times) < STEP_TIMES_MAX:
            self.step_times.append(step)

    # --- writing ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Write batches until ``stop``: each at most once per ``flush_s``."""
        self._loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            await self._wake.wait()
            self._wake.clear()
            while not self._stop.is_set():
                with self._buffer_lock:
                    if not self._pending or self._oldest is None:
                        break
                    due = max(self._oldest, self._last_write) + self.flush_s
                delay = due - self._monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), delay)
                    if self._stop.is_set():
                        return  # close() writes what is left
                await self.flush()

    def stop(self) -> None:
        """End ``run`` after the write in flight (never cut a write off half-way)."""
        self._stop.set()
        self._wake.set()

    async def flush(self) -> None:
        async with self._write_lock:
            with self._buffer_lock:
                batch, self._pending, self._oldest = self._pending, [], None
            if not batch:
                return
            self._last_write = self._monotonic()
            self.write_times.append(self._last_write)
            try:
                await asyncio.to_thread(self._write, batch)
            except Exception as exc:
                log.warning("writing run events failed; kept for the next write: %s", exc)
                with self._buffer_lock:
                    self._pending = batch + self._pending
                    while len(self._pending) > BUFFER_MAX:
                        self._drop_oldest_bounded()
                    self._oldest = self._oldest or self._monotonic()

    def _write(self, batch: list[dict[str, Any]]) -> None:
        fresh = [e for e in batch if "seq" not in e]
        if fresh:
            batch = self._number(batch, fresh)
        if batch:
            batch.sort(key=lambda e: int(e["seq"]))
            self.store.put(
                self.tenant_id, self.job_id, batch, expires_at=self.expires_at, attempt=self.attempt
            )
            self.writes += 1

    def _number(
        self, batch: list[dict[str, Any]], fresh: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Give ``fresh`` their numbers, from the reservation when it holds them, else from a
        new one (the job's allowance decides which bounded events are kept); the batch
        without the events dropped."""
        bounded = [e for e in fresh if EventType(e["type"]) not in UNBOUNDED_TYPES]
        if self._renumbered:
            self._renumbered = False
            self._last_seq = self._next_seq - 1  # what is left of the reservation goes unused
        spare = self._last_seq - self._next_seq + 1
        if len(fresh) > spare or len(bounded) > self._allowance:
            from_old = min(len(bounded), self._allowance)
            need = len(bounded) - from_old
            asked = need + RESERVE
            first, total = self._numbers(
                self.tenant_id,
                self.job_id,
                count=len(fresh) + RESERVE,
                bounded=asked,
                expires_at=self.expires_at,
            )
            before = total - asked  # the job's events and reservations before this one
            granted = max(0, min(need, self.max_events - before))
            over = need - granted
            if over > 0:
                # Earlier attempts (or this one) used the job's allowance: keep the oldest.
                self._full = True
                dropping = {id(e) for e in bounded[len(bounded) - over :]}
                with self._buffer_lock:
                    self._dropped += over
                batch = [e for e in batch if id(e) not in dropping]
                fresh = [e for e in fresh if id(e) not in dropping]
            # What the attempt may keep: the old allowance, this batch's grant, and the part
            # of the reserve still within the job's (the rest is counted but never used).
            self._allowance += granted + max(0, min(RESERVE, self.max_events - before - granted))
            if first != self._last_seq + 1:  # another writer numbered in between: start here
                self._next_seq = first
            self._last_seq = first + len(fresh) + RESERVE + over - 1
        for offset, event in enumerate(fresh):
            event["seq"] = self._next_seq + offset
        self._next_seq += len(fresh)
        kept = sum(1 for e in fresh if EventType(e["type"]) not in UNBOUNDED_TYPES)
        self._allowance -= kept
        return batch

    def renumber(self) -> None:
        """Someone else may number this job's events now (a takeover began or ended): the
        next batch asks the store for numbers, so it comes after theirs."""
        self._renumbered = True

    async def close(self) -> None:
        """Write what is left, with one ``truncated`` event if events were dropped."""
        with self._buffer_lock:
            self._closed = True
        await self._final_flush()
        with self._buffer_lock:
            dropped = self._dropped
        if dropped:
            self.emit(
                EventType.TRUNCATED,
                dropped=dropped,
                message=(
                    f"{dropped} events of this attempt were not kept: a job keeps at most "
                    f"{self.max_events}"
                ),
            )
            await self._final_flush()

    async def _final_flush(self) -> None:
        for pause in (0.2, 0.5, None):  # nothing flushes after this: a short retry
            await self.flush()
            with self._buffer_lock:
                if not self._pending or pause is None:
                    return
            await asyncio.sleep(pause)


@contextlib.asynccontextmanager
async def recording(events: RunEvents) -> Any:
    """Run the flusher while the body runs (``close`` is the caller's, after the body)."""
    task = asyncio.create_task(events.run(), name=f"events {events.job_id}")
    try:
        yield events
    finally:
        events.stop()
        await asyncio.wait({task})  # a write in flight completes; nothing is dropped


def attempt_events(
    store: EventStore,
    job: JobRecord,
    settings: WorkerSettings,
    clock: Callable[[], float],
    *,
    numbers: EventNumbers | None = None,
    reserved: int = 0,
) -> RunEvents:
    """An attempt's run events, as the worker's settings bound them, opened with its
    ``running`` state (``numbers``, ``reserved``: as ``RunEvents`` takes them)."""
    events = RunEvents(
        store,
        job,
        numbers=numbers,
        reserved=reserved,
        flush_s=settings.events_flush_s,
        max_events=settings.events_max_per_job,
        retention_s=settings.events_retention_s,
        clock=clock,
        pricing=settings.pricing_worker,
    )
    events.emit(EventType.STATE, status=JobStatus.RUNNING.value)
    return events
