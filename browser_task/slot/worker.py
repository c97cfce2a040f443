"""The worker: N slots, each long-polling SQS for one job at a time.

A message's life in a slot: the lifecycle peeks at its job (in the message's preview, or the
record: a duplicate of a finished job is deleted unrun), the circuit breaker admits the
job's target or the lifecycle defers it, the lifecycle claims it (or says what to do with
the message instead), the runner runs it in a fresh browser context, and the lifecycle
writes the outcome fenced on (attempt, owner). The claim deletes the message: from then on
the job's lease, kept until the outcome is written, holds it, and each worker's lease watch
takes back its pool's jobs whose worker died (browser_task.slot.leases). The worker owns the
slots, the browser and the drain; every move of a job is the lifecycle's.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from browser_task.errors import first_line
from browser_task.observe.reporting import log_sink
from browser_task.observe.run_events import attempt_events, recording
from browser_task.observe.telemetry import JobLog, noted
from browser_task.observe.usage import AttemptMeter
from browser_task.run.early import EarlyContext
from browser_task.run.signals import SlotSignals
from browser_task.slot.leases import LeaseKeeper
from browser_task.slot.parts import WorkerParts
from browser_task.slot.waiting import OutsideSlots
from pagefleet.jobs.lifecycle import MessageAnswer, Outcome
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.live.numbers import RESERVE, numbers_of
from pagefleet.specs.resources import claim_owner
from pagefleet.specs.settings import WorkerSettings
from pagefleet.targets.breakers import TENANT

# How long a stopping worker waits for outcome writes and message deletes in flight.
BACKGROUND_GRACE_S = 10.0
# After a drain gave up on a job, how long its slot may take to hand the job back.
ABORT_GRACE_S = 15.0

# A received message and the lifecycle's look at its job (None: not looked at).
Looked = tuple[ReceivedMessage, MessageAnswer | None]


class Worker:
    def __init__(self, settings: WorkerSettings, parts: WorkerParts) -> None:
        """Everything the worker uses is given (``build_worker`` wires it from the
        settings); the worker owns its slots, the browser's life and the drain."""
        self.settings = settings
        self.worker_id = parts.worker_id
        self.lifecycle = parts.lifecycle
        self._later = parts.later
        self._deletes = parts.deletes
        self._hooks = parts.hooks
        self.browsers = parts.browsers
        self._runner = parts.runner
        self._completion = parts.completion
        self.receiver = parts.receiver
        self.lease_watch = parts.lease_watch
        self._breaker = parts.breakers
        self._events = parts.events
        self._protection = parts.protection
        self.metrics = parts.metrics
        self.liveness = parts.liveness
        self._log = parts.log
        self._clock = parts.clock
        self._stop_flag = parts.stop_flag
        self._abort = parts.abort
        self.inbox = parts.inbox
        # A task-isolated pool runs one job a task: nobody else's job runs beside a wait.
        isolated = settings.isolation == "task"
        self.outside = OutsideSlots(0 if isolated else settings.max_waiting_contexts)
        self._running = 0
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self.jobs_handled = 0

    # --- start and stop -------------------------------------------------------------------
    def request_stop(self) -> None:
        """Stop taking work and drain. Safe to call from signal handlers and other threads."""
        self._stop_flag.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)

    async def run(self) -> None:
        settings = self.settings
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # Long polls hold a thread each; keep room for heartbeats, uploads and writes.
        self._loop.set_default_executor(
            ThreadPoolExecutor(max_workers=settings.concurrency * 6 + 4, thread_name_prefix="io")
        )
        if self._stop_flag.is_set():
            self._stopping.set()
        # Launch before polling: the first job should not pay for the browser start. The
        # inbox is made meanwhile, and usable (AWS: 1 s after CreateQueue) before any
        # session is claimed.
        inbox = self.inbox
        if inbox is not None:
            await asyncio.gather(self.browsers.start(), asyncio.to_thread(inbox.start))
        else:
            await self.browsers.start()
        flusher = asyncio.create_task(self.metrics.run_flusher(), name="metrics")
        breaker_flusher = asyncio.create_task(self._breaker.run_flusher(), name="breaker")
        deletes = asyncio.create_task(self._deletes.run_flusher(), name="deletes")
        claims = asyncio.create_task(self._hooks.run_flusher(), name="after-claims")
        watch = asyncio.create_task(self.lease_watch.run(self._stopping), name="lease-watch")
        slots = [
            asyncio.create_task(self._slot(n), name=f"slot-{n}")
            for n in range(settings.concurrency)
        ]
        self._log.info("worker started", concurrency=settings.concurrency)
        self.ready.set()
        try:
            await self._stopping.wait()
            await self._drain(slots)
        finally:
            for task in slots:
                task.cancel()
            await asyncio.to_thread(self.receiver.hand_back)
            await self.browsers.close()
            if inbox is not None:  # after the slots: no session of this worker is left
                await asyncio.to_thread(inbox.stop)
            flusher.cancel()
            breaker_flusher.cancel()
            watch.cancel()
            await self._protection.close()
            with contextlib.suppress(Exception):
                await self._breaker.flush()
            await asyncio.to_thread(self._later.shutdown, wait=True)
            deletes.cancel()  # the claims' deletes are all asked for now: the rest go here
            claims.cancel()  # and their hooks
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._deletes.flush)
            await asyncio.to_thread(self._hooks.flush)  # hooks never raise
            self.metrics.flush()
            self._log.info("worker stopped", jobs=self.jobs_handled)

    async def _drain(self, slots: list[asyncio.Task[None]]) -> None:
        self._log.info("draining", drain_seconds=self.settings.drain_seconds)
        self.browsers.spare.stop()  # a context made ahead now would only be closed unused
        # A slot is free before its job's uploads are in: those finish within the period too.
        running = {*slots, *self._background}
        _done, pending = await asyncio.wait(running, timeout=self.settings.drain_seconds)
        # A run waiting for a person outside its slot is handed back as a slot's would be.
        pending &= {*slots, *self.outside.tasks}
        if pending:
            self._log.warning("drain period over; handing running jobs back", jobs=len(pending))
            self._abort.set()
            _done, pending = await asyncio.wait(pending, timeout=ABORT_GRACE_S)
            for task in pending & set(slots):  # one outside settles its outcome below
                task.cancel()
        # Outcome writes and message deletes still in flight (they may spawn more).
        settle_by = time.monotonic() + BACKGROUND_GRACE_S
        while self._background and time.monotonic() < settle_by:
            await asyncio.wait(
                set(self._background), timeout=max(0.0, settle_by - time.monotonic())
            )

    # --- polling --------------------------------------------------------------------------
    async def _slot(self, number: int) -> None:
        assert self._stopping is not None
        ahead: list[asyncio.Future[list[Looked]]] = []  # the next messages, received early

        def look_ahead() -> None:
            if not ahead and not self._stopping.is_set():  # type: ignore[union-attr]
                ahead.append(asyncio.ensure_future(self._take()))

        while not self._stopping.is_set():
            self.liveness.beat()  # the container health check reads it
            try:
                looked = await (ahead.pop() if ahead else self._take())
            except Exception as exc:
                self._log.warning("receive failed", slot=number, error=first_line(str(exc)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 1.0)
                continue
            for received, peek in looked:
                if self._stopping.is_set():
                    await asyncio.to_thread(self.lifecycle.release, received, received.queue)
                    continue
                try:
                    await self._handle(received, peek, look_ahead)
                except Exception:
                    self._log.error(
                        "unexpected error handling a message",
                        exc_info=True,
                        message_id=received.message_id,
                    )
        for early in ahead:  # stopping: what was received ahead goes back at once
            with contextlib.suppress(Exception):
                for received, _ in await early:
                    await asyncio.to_thread(self.lifecycle.release, received, received.queue)

    async def _take(self) -> list[Looked]:
        """The next messages, each with the lifecycle's look at its job (None: not a job
        message, or stopping)."""
        looked: list[Looked] = []
        for received in await self._receive():
            peek = None
            if received.message is not None and not self._stop_flag.is_set():
                peek = await asyncio.to_thread(self.lifecycle.peek, received, received.queue)
            looked.append((received, peek))
        return looked

    async def _receive(self) -> list[ReceivedMessage]:
        assert self._stopping is not None
        poll = asyncio.ensure_future(asyncio.to_thread(self._receive_blocking))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({poll, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if poll.done():
            return poll.result()
        # Stopping: the receive thread hands back whatever it still gets (see below).
        poll.add_done_callback(lambda f: f.cancelled() or f.exception())
        return []

    def _receive_blocking(self) -> list[ReceivedMessage]:
        messages = self.receiver.receive()
        if messages and self._stop_flag.is_set():
            for received in messages:
                self.lifecycle.release(received, received.queue)
            return []
        return messages

    # --- one message ----------------------------------------------------------------------
    async def _handle(
        self, received: ReceivedMessage, peek: MessageAnswer | None, look_ahead: Callable[[], None]
    ) -> None:
        message = received.message
        if message is None:
            # Not ours to fix: after maxReceiveCount deliveries the queue moves it to the DLQ.
            self._log.error(
                "message is not a job message; leaving it for the dead-letter queue",
                message_id=received.message_id,
                receive_count=received.receive_count,
            )
            return
        if peek is None:  # received as the worker began to stop: not looked at
            await asyncio.to_thread(self.lifecycle.release, received, received.queue)
            return
        # The lifecycle settles the message on the queue it came from (pool and priority).
        pool = received.queue
        log = self._log.bind(
            correlation_id=message.correlation_id,
            tenant_id=message.tenant_id,
            job_id=message.job_id,
            message_id=received.message_id,
        )
        ahead = peek.preview
        if ahead is None:
            noted(peek, log, self.metrics)
            return
        # The breakers need the job's target origin (its message's preview, or its record).
        domain = ahead.origin
        probe: frozenset[str] = frozenset()  # the breakers this job is the probe of
        if domain is not None:
            admission = await self._breaker.admit(domain, message.tenant_id)
            if not admission.allowed:
                delay = admission.retry_after_s
                whose = " (this tenant's jobs)" if admission.scope == TENANT else ""
                deferred = await asyncio.to_thread(
                    self.lifecycle.defer,
                    received,
                    pool,
                    reason=f"circuit open for {domain}{whose}; next try in {max(1, delay)} s",
                    delay_s=delay,
                )
                noted(deferred, log, self.metrics)
                return
            probe = admission.probes

        # The context opens while the claim is written (browser_task.run.early).
        early = self._runner.open_early(ahead, log)
        # A fresh owner token per claim: a retried claim whose first reply was lost finds its
        # own token, while another slot of this worker never mistakes the job for its own.
        try:
            claim = await asyncio.to_thread(
                self.lifecycle.claim,
                received,
                pool,
                owner=claim_owner(self.worker_id, secrets.token_hex(4)),
                lease_seconds=self.settings.lease_seconds,
                worker=self.worker_id,
                # The attempt's first event numbers, in the claim's write (live.numbers).
                events=RESERVE if ahead.events_on_record else 0,
            )
        except BaseException:
            if early is not None:  # stopping: close it without holding up the stop
                self._spawn(early.discard())
            raise
        if claim.job is None:
            if early is not None:
                await early.discard()
            noted(claim, log, self.metrics)
            await self._completion.release_probe(domain, message.tenant_id, probe)
            return
        log = log.bind(attempt=claim.job.attempt)
        if claim.reason:  # e.g. its last worker stopped: the take-back's line, or none
            log.info("job claimed", reason=claim.reason)
        await self._run(claim, received, domain, probe, log, look_ahead, early)

    async def _run(
        self,
        claim: MessageAnswer,
        received: ReceivedMessage,
        domain: str | None,
        probe: frozenset[str],
        log: JobLog,
        look_ahead: Callable[[], None],
        early: EarlyContext | None,
    ) -> None:
        job = claim.job
        assert job is not None
        if received.sent_at_ms:
            self.metrics.queue_delay(self._clock() * 1000 - received.sent_at_ms)
        started = time.monotonic()
        events = attempt_events(
            self._events,
            job,
            self.settings,
            self._clock,
            numbers=numbers_of(job, self.lifecycle.store, self._events),
            reserved=claim.events_reserved,
        )
        log = log.recording(log_sink(events))
        log.info("job started", receive_count=received.receive_count)
        await self._protection.job_started()
        self._slot_in_use(+1)
        meter = AttemptMeter()
        left = asyncio.Event()  # the run waits for a person outside this slot
        signals = SlotSignals(
            workflow_ended=look_ahead,
            leave_slot=lambda: self.outside.leave(left, stopping=self._stop_flag.is_set()),
        )
        # Kept from here until the outcome is written (the completion stops it).
        lease = LeaseKeeper(
            self.lifecycle,
            job,
            lease_s=self.settings.lease_seconds,
            every_s=self.settings.heartbeat_seconds,
            log=log,
        ).start()
        run = asyncio.ensure_future(
            self._runner.run(job, log, lease, events, meter, signals, early)
        )
        work = asyncio.ensure_future(self._browser_work(run, signals, events))
        leaving = asyncio.ensure_future(left.wait())
        try:
            await asyncio.wait({work, leaving}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                work.result()  # its recording failed: the slot's failure, as it always was
        except BaseException:
            run.cancel()
            work.cancel()
            await lease.stop()
            await self._protection.job_ended()
            raise
        finally:
            leaving.cancel()
            self._slot_in_use(-1)
        self.jobs_handled += 1
        completion = self._completion
        settle = completion.settle(run, job, lease, started, domain, probe, log, meter, events)
        if not work.done():  # it waits for a person: the slot takes its next message
            log.info("waiting for a person outside the slot", waiting=self.outside.held)
            carried = self.outside.carry(work, settle)
            self._background.add(carried)  # a drain waits for it as for a slot
            carried.add_done_callback(self._background.discard)
            return
        self.outside.stayed(left)
        # The browser context is closed: the slot takes its next message while this job's
        # uploads finish and its outcome is written (drain waits for these).
        self._spawn(settle)

    async def _browser_work(
        self, run: asyncio.Future[Outcome | None], signals: SlotSignals, events: Any
    ) -> None:
        """The run, recorded, until its context is closed (``released``) or it ends."""
        async with self.liveness.busy(), recording(events):
            released = asyncio.ensure_future(signals.released.wait())
            either: set[asyncio.Future[Any]] = {run, released}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                released.cancel()

    def _slot_in_use(self, delta: int) -> None:
        """Slots running a job's browser work (saturation: at most ``concurrency``)."""
        self._running += delta
        self.metrics.slots_busy(self._running)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
