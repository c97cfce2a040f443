"""The worker: N slots, each long-polling SQS for one job at a time.

A job's life in a slot: claim it (conditional write: attempt + lease owner), run its
workflow in a fresh browser context under a heartbeat (queue visibility + lease) and a
job-level watchdog, upload artifacts, write the outcome fenced on (attempt, owner), then
delete the message. A duplicate delivery is recognised at claim time and deleted unrun.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from browser_task.artifacts import ArtifactCollector
from browser_task.breaker_gate import BreakerGate, target_domain
from browser_task.browser import BrowserPool, BrowserSession
from browser_task.context import RunContext, SecretsResolver
from browser_task.egress import EgressGuard, Resolver, system_resolver
from browser_task.egress_proxy import (
    UNREACHABLE,
    Decision,
    EgressProxy,
    Refused,
    UpstreamProxy,
)
from browser_task.errors import (
    FailJob,
    JobFailure,
    RetryJob,
    RotateBrowser,
    first_line,
)
from browser_task.executor import (
    TenantPolicies,
    capture_failure_screenshot,
    describe,
    prepare_run,
    run_workflow,
    scheme_guard,
)
from browser_task.secrets import SecretsManagerResolver
from browser_task.sessions import S3SessionStore, SessionStore
from browser_task.task_protection import TaskProtection
from browser_task.telemetry import JobLog, WorkerMetrics
from pagefleet import aws
from pagefleet import metrics_names as metric
from pagefleet.adapters.sqs import ReceivedMessage
from pagefleet.errors import (
    DeadlinePassed,
    IllegalTransition,
    LeaseLost,
    NotFound,
    RetryNotDue,
)
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.models import (
    Artifact,
    AttemptRecord,
    JobError,
    JobMessage,
    JobRecord,
    ProxyOptions,
    iso,
    utcnow,
)
from pagefleet.settings import WorkerSettings

# How long a stopping worker waits for outcome writes and message deletes in flight.
BACKGROUND_GRACE_S = 10.0
# After a drain gave up on a job, how long its slot may take to hand the job back.
ABORT_GRACE_S = 15.0
# The record's lease ends this long before the message's visibility does, so a message that
# comes back after a worker died always finds the lease already expired and reclaims the job.
LEASE_MARGIN_S = 2
# How often a running job's cancel flag is read: a cancel takes effect within this, plus
# the time to close the context (the promise is "within 3 seconds").
CANCEL_POLL_S = 1.0


def upstream_of(proxy: ProxyOptions) -> UpstreamProxy:
    return UpstreamProxy(proxy.host, proxy.port, proxy.username, proxy.password)


def proxy_refused(refused: Refused) -> JobFailure:
    """The job's proxy could not be used at all (checked before any browser work)."""
    if refused.kind == UNREACHABLE:
        return RetryJob(refused.reason, kind="proxy_failed")
    return FailJob(
        f"options.proxy is not allowed: {refused.reason}; use a proxy on a public address",
        kind="egress_refused",
    )


def _all_refusals(proxy: EgressProxy) -> Callable[[], list[Decision]]:
    # The job's own listener serves only this job: all of its refusals are the job's.
    return lambda: proxy.refusals


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class Outcome:
    status: JobStatus
    result: dict[str, Any] | None = None
    error: JobError | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    retry_delay_s: int | None = None
    release_message: bool = False  # hand the message back instead of deleting it


class Worker:
    def __init__(
        self,
        settings: WorkerSettings,
        services: JobServices,
        *,
        secrets_resolver: SecretsResolver | None = None,
        sessions: SessionStore | None = None,
        policies: TenantPolicies | None = None,
        breakers: BreakerGate | None = None,
        protection: TaskProtection | None = None,
        metrics: WorkerMetrics | None = None,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.worker_id = settings.worker_id or default_worker_id()
        self._store = services.store
        self._queue = services.queue
        self._artifacts = services.artifacts
        self._secrets = secrets_resolver or SecretsManagerResolver(
            aws.client("secretsmanager"), settings.stage
        )
        self._sessions = sessions or S3SessionStore(aws.client("s3"), settings.artifacts_bucket)
        self._policies = policies or aws.tenant_store(settings.tenants_table)
        self._breaker = breakers or BreakerGate(
            aws.domain_breakers(settings), self.worker_id, clock=clock
        )
        self._protection = protection or TaskProtection()
        self._busy = 0
        self._running = 0
        self.metrics = metrics or WorkerMetrics(settings.pool)
        self._resolver = resolver or system_resolver()
        self._clock = clock
        self.browsers = BrowserPool(
            settings,
            on_crash=lambda: self.metrics.count(metric.BROWSER_CRASHES),
            resolver=self._resolver,
        )
        self._log = JobLog(worker=self.worker_id, pool=settings.pool)
        # Set from any thread; receive threads read it to hand back late messages at once.
        self._stop_flag = threading.Event()
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._abort: asyncio.Event | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self.jobs_handled = 0

    # --- lifecycle ------------------------------------------------------------------------
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
        self._abort = asyncio.Event()
        # Long polls hold a thread each; keep room for heartbeats, uploads and writes.
        self._loop.set_default_executor(
            ThreadPoolExecutor(max_workers=settings.concurrency * 6 + 4, thread_name_prefix="io")
        )
        if self._stop_flag.is_set():
            self._stopping.set()
        # Launch before polling: the first job should not pay for the browser start.
        await self.browsers.start()
        flusher = asyncio.create_task(self.metrics.run_flusher(), name="metrics")
        breaker_flusher = asyncio.create_task(self._breaker.run_flusher(), name="breaker")
        slots = [
            asyncio.create_task(self._slot(n), name=f"slot-{n}")
            for n in range(settings.concurrency)
        ]
        self._log.info("worker started", concurrency=settings.concurrency)
        self.ready.set()
        try:
            await self._stopping.wait()
            self._log.info("draining", drain_seconds=settings.drain_seconds)
            _done, pending = await asyncio.wait(slots, timeout=settings.drain_seconds)
            if pending:
                self._log.warning("drain period over; handing running jobs back", jobs=len(pending))
                self._abort.set()
                _done, pending = await asyncio.wait(pending, timeout=ABORT_GRACE_S)
                for task in pending:
                    task.cancel()
            # Outcome writes and message deletes still in flight (they may spawn more).
            settle_by = time.monotonic() + BACKGROUND_GRACE_S
            while self._background and time.monotonic() < settle_by:
                await asyncio.wait(
                    set(self._background), timeout=max(0.0, settle_by - time.monotonic())
                )
        finally:
            for task in slots:
                task.cancel()
            await self.browsers.close()
            flusher.cancel()
            breaker_flusher.cancel()
            with contextlib.suppress(Exception):
                await self._breaker.flush()
            self.metrics.flush()
            self._log.info("worker stopped", jobs=self.jobs_handled)

    # --- polling --------------------------------------------------------------------------
    async def _slot(self, number: int) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set():
            try:
                messages = await self._receive()
            except Exception as exc:
                self._log.warning("receive failed", slot=number, error=first_line(str(exc)))
                await self._sleep_unless_stopping(1.0)
                continue
            for received in messages:
                if self._stopping.is_set():
                    await self._release(received)
                    continue
                try:
                    await self._handle(received)
                except Exception:
                    self._log.error(
                        "unexpected error handling a message",
                        exc_info=True,
                        message_id=received.message_id,
                    )

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
        settings = self.settings
        messages = self._queue.receive(
            settings.pool,
            max_messages=1,
            wait_seconds=settings.poll_wait_seconds,
            visibility=settings.lease_seconds,
        )
        if messages and self._stop_flag.is_set():
            for received in messages:
                with contextlib.suppress(Exception):
                    self._queue.change_visibility(settings.pool, received.receipt_handle, 0)
            return []
        return messages

    async def _sleep_unless_stopping(self, seconds: float) -> None:
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    # --- one message ----------------------------------------------------------------------
    async def _handle(self, received: ReceivedMessage) -> None:
        message = received.message
        if message is None:
            # Not ours to fix: after maxReceiveCount deliveries the queue moves it to the DLQ.
            self._log.error(
                "message is not a job message; leaving it for the dead-letter queue",
                message_id=received.message_id,
                receive_count=received.receive_count,
            )
            return
        log = self._log.bind(
            correlation_id=message.correlation_id,
            tenant_id=message.tenant_id,
            job_id=message.job_id,
            message_id=received.message_id,
        )
        now = self._clock()
        # The breaker needs the job's target domain, which only the record knows.
        try:
            peek = await asyncio.to_thread(
                self._store.get, message.tenant_id, message.job_id, consistent=False
            )
        except NotFound:
            log.warning("job not found; deleting its message")
            await self._delete(received, log)
            return
        except Exception as exc:
            log.error(
                "reading the job failed; the message will be redelivered",
                error=first_line(str(exc)),
            )
            return
        if peek.status.is_final:  # final states never change: a stale read is still right
            log.info("duplicate delivery; deleting the message", status=peek.status.value)
            await self._delete(received, log)
            return
        domain = target_domain(peek)
        probe = False
        if domain is not None:
            admission = await self._breaker.admit(domain)
            if not admission.allowed:
                await self._defer(received, message, domain, admission.retry_after_s, log)
                return
            probe = admission.probe

        # A fresh owner token per claim: a retried claim whose first reply was lost finds its
        # own token, while another slot of this worker never mistakes the job for its own.
        owner = f"{self.worker_id}/{secrets.token_hex(4)}"
        try:
            record = await asyncio.to_thread(
                self._store.claim,
                message.tenant_id,
                message.job_id,
                owner=owner,
                lease_until=self._lease_end(now),
                now=int(now),
                started_at=iso(utcnow()),
            )
        except NotFound:
            log.warning("job not found; deleting its message")
            await self._delete(received, log)
            return
        except DeadlinePassed:
            await self._expire(message, received, log)
            await self._release_probe(domain, probe)
            return
        except RetryNotDue as early:
            # An early duplicate of a retry's message: bring it back when the retry is due.
            due = int(early.details.get("retry_at", now)) - int(now)
            await self._hide(received, max(1, due))
            await self._release_probe(domain, probe)
            return
        except IllegalTransition:
            mine = await self._claim_refused(message, received, now, owner, log)
            if mine is None:
                await self._release_probe(domain, probe)
                return
            record = mine
        except Exception as exc:
            log.error("claim failed; the message will be redelivered", error=first_line(str(exc)))
            await self._release_probe(domain, probe)
            return
        log = log.bind(attempt=record.attempt)
        if record.attempts_used > record.request.max_attempts:
            # A reclaim after the last allowed attempt's worker died: no attempt is left.
            await self._finish(
                record,
                received,
                Outcome(
                    JobStatus.FAILED,
                    error=JobError(
                        kind="lease_expired",
                        message=(
                            f"the worker of attempt {record.attempt - 1} stopped without "
                            f"finishing and max_attempts ({record.request.max_attempts}) is spent"
                        ),
                        timeout="lease",
                    ),
                ),
                0.0,
                log,
            )
            await self._release_probe(domain, probe)
            return
        if received.sent_at_ms:
            self.metrics.queue_delay(now * 1000 - received.sent_at_ms)
        started = time.monotonic()
        log.info("job started", receive_count=received.receive_count)
        await self._busy_changed(+1)
        self._slot_in_use(+1)
        try:
            outcome = await self._run(record, received, log)
        except BaseException:
            await self._busy_changed(-1)
            raise
        finally:
            self._slot_in_use(-1)
        self.jobs_handled += 1
        # The browser context is closed and the uploads are in: the slot takes its next
        # message while this job's outcome is written (drain waits for these writes).
        duration_ms = (time.monotonic() - started) * 1000
        self._spawn(self._complete(record, received, outcome, duration_ms, domain, probe, log))

    async def _complete(
        self,
        record: JobRecord,
        received: ReceivedMessage,
        outcome: Outcome | None,
        duration_ms: float,
        domain: str | None,
        probe: bool,
        log: JobLog,
    ) -> None:
        try:
            if outcome is None:
                await self._release_probe(domain, probe)
                return
            await self._finish(record, received, outcome, duration_ms, log)
            if domain is not None and outcome.status is not JobStatus.CANCELLED:
                await self._breaker.record(domain, outcome.error, probe=probe)
            elif probe:
                await self._release_probe(domain, probe)
        except Exception:
            log.error("unexpected error completing the job", exc_info=True)
        finally:
            await self._busy_changed(-1)

    async def _claim_refused(
        self,
        message: JobMessage,
        received: ReceivedMessage,
        now: float,
        owner: str,
        log: JobLog,
    ) -> JobRecord | None:
        """Why could we not claim? Returns the record when the claim was ours after all."""
        try:
            current = await asyncio.to_thread(self._store.get, message.tenant_id, message.job_id)
        except NotFound:
            await self._delete(received, log)
            return None
        if current.status is JobStatus.RUNNING and current.lease_owner == owner:
            log.info("claim applied though its reply was lost; running the job")
            return current
        if current.status.is_final:
            log.info("duplicate delivery; deleting the message", status=current.status.value)
            await self._delete(received, log)
        elif current.status is JobStatus.RUNNING and current.lease_expires_at is not None:
            # Another attempt holds a live lease. Keep this copy, hidden until that lease
            # would run out: if its worker finishes, the copy is deleted as a duplicate then;
            # if it dies, the copy is what brings the job back.
            # Looked at again every two heartbeats at most, so a finished job's copy goes soon.
            wait = max(1, current.lease_expires_at - int(now) + LEASE_MARGIN_S)
            wait = min(wait, 2 * self.settings.heartbeat_seconds)
            log.info("job running elsewhere; hiding this copy", hide_s=wait)
            await self._hide(received, wait)
        else:
            log.info("job cannot start now; leaving the message", status=current.status.value)
        return None

    async def _defer(
        self,
        received: ReceivedMessage,
        message: JobMessage,
        domain: str,
        delay_s: int,
        log: JobLog,
    ) -> None:
        """The target's circuit is open: the job waits, queued, without spending an attempt.

        The message is re-sent with a delay (and the received one deleted) rather than hidden,
        so waiting out an outage never counts toward the dead-letter queue's receive limit.
        """
        delay = max(1, min(900, delay_s))
        reason = f"circuit open for {domain}; next try in {delay} s"
        try:
            await asyncio.to_thread(self._queue.send, message, delay_seconds=delay)
        except Exception as exc:
            log.warning(
                "could not defer the job; the message will be redelivered",
                error=first_line(str(exc)),
            )
            return
        with contextlib.suppress(Exception):
            await asyncio.to_thread(
                self._store.defer,
                message.tenant_id,
                message.job_id,
                reason=reason,
                at=iso(utcnow()),
            )
        log.info("job deferred", domain=domain, delay_s=delay)
        await self._delete(received, log)

    async def _expire(self, message: JobMessage, received: ReceivedMessage, log: JobLog) -> None:
        error = JobError(
            kind="expired", message="the job did not start before its deadline", timeout="deadline"
        )
        try:
            await asyncio.to_thread(
                self._store.transition,
                message.tenant_id,
                message.job_id,
                JobStatus.EXPIRED,
                at=iso(utcnow()),
                error=error,
            )
        except IllegalTransition:
            pass  # someone else (the sweeper, a cancel) ended it first
        except Exception as exc:
            log.warning("could not expire the job", error=first_line(str(exc)))
            return
        self.metrics.job_finished(JobStatus.EXPIRED.value, 0.0)
        log.info("job expired before it started")
        await self._delete(received, log)

    async def _release_probe(self, domain: str | None, probe: bool) -> None:
        """A probe that did not run says nothing: reopen the circuit for another cooldown."""
        if domain is not None and probe:
            await self._breaker.record(
                domain,
                JobError(kind="target_unavailable", message="probe not run", retryable=True),
                probe=True,
            )

    def _slot_in_use(self, delta: int) -> None:
        """Slots running a job's browser work (saturation: at most ``concurrency``)."""
        self._running += delta
        self.metrics.slots_busy(self._running)

    async def _busy_changed(self, delta: int) -> None:
        """Jobs in flight, outcome writes included: the task stays protected until done."""
        self._busy += delta
        if delta > 0:
            await self._protection.job_started()
        else:
            await self._protection.job_ended()

    # --- running --------------------------------------------------------------------------
    async def _run(
        self, record: JobRecord, received: ReceivedMessage, log: JobLog
    ) -> Outcome | None:
        """Run the workflow; None when the lease was lost (write nothing more)."""
        assert self._abort is not None
        request = record.request
        lease_lost = asyncio.Event()
        heartbeat = asyncio.create_task(self._heartbeat(record, received, lease_lost, log))
        collector = ArtifactCollector(
            self._artifacts,
            tenant_id=record.tenant_id,
            job_id=record.job_id,
            attempt=record.attempt,
            max_bytes=self.settings.max_artifact_bytes,
        )
        session: BrowserSession | None = None
        try:
            try:
                # Secrets, evaluate policy, leading sessions: fail before any browser work.
                prepared = await prepare_run(
                    request,
                    record.tenant_id,
                    secrets=self._secrets,
                    sessions=self._sessions,
                    policies=self._policies,
                )
            except JobFailure as refused:
                return self._failed(record, refused, {}, [])
            options = prepared.options or request.options
            guard = EgressGuard(
                allow_loopback=self.settings.allow_loopback, resolver=self._resolver
            )
            job_egress: EgressProxy | None = None
            if options.proxy is not None:
                try:
                    job_egress = await self.browsers.job_egress(upstream_of(options.proxy))
                except Refused as refused:
                    return self._failed(record, proxy_refused(refused), {}, [])
            try:
                session = await self.browsers.new_session(
                    options,
                    storage_state=prepared.storage_state,
                    setup=scheme_guard(guard),
                    egress=job_egress,
                )
            except Exception as launch_error:
                failure: JobFailure = RotateBrowser(
                    f"could not open a browser context: {first_line(str(launch_error))}"
                )
                return self._failed(record, failure, {}, [])
            ctx = RunContext(
                tenant_id=record.tenant_id,
                job_id=record.job_id,
                attempt=record.attempt,
                request=request,
                session=session,
                guard=guard,
                artifacts=collector,
                secrets=self._secrets,
                sessions=self._sessions,
                prepared=prepared,
                egress_refusals=(
                    _all_refusals(job_egress)
                    if job_egress is not None
                    else self._refusals_since(time.time())
                ),
            )
            work = asyncio.create_task(run_workflow(ctx), name=f"job {record.job_id}")
            lost = asyncio.create_task(lease_lost.wait())
            abort = asyncio.create_task(self._abort.wait())
            cancel = asyncio.create_task(self._watch_cancel(record))
            try:
                await asyncio.wait(
                    {work, lost, abort, cancel},
                    timeout=request.options.job_timeout_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                lost.cancel()
                abort.cancel()
                cancel.cancel()

            if work.done():
                crash = work.exception()
                if crash is None:
                    await session.close()
                    try:
                        artifacts = await collector.collect()
                    except JobFailure as upload_failure:
                        artifacts, _ = await collector.settle()
                        return self._failed(record, upload_failure, ctx.result, artifacts)
                    return Outcome(JobStatus.SUCCEEDED, result=work.result(), artifacts=artifacts)
                if isinstance(crash, JobFailure):
                    failure = crash
                else:
                    log.error(
                        "internal error running the workflow",
                        error=f"{type(crash).__name__}: {first_line(str(crash))}",
                    )
                    failure = RetryJob(
                        f"internal worker error: {type(crash).__name__}", kind="internal_error"
                    )
                    if ctx.step_index is not None:
                        step = request.steps[ctx.step_index]
                        failure.at_step(ctx.step_index, describe(step, ctx))
                await capture_failure_screenshot(ctx)
                await session.close()
                artifacts, _ = await collector.settle()
                return self._failed(record, failure, ctx.result, artifacts)

            if lease_lost.is_set():
                log.warning("lease lost; abandoning the run without writing")
                await self._kill(work, session)
                collector.cancel()
                return None

            if cancel.done() and not cancel.cancelled() and cancel.result():
                # Stopped mid-action by closing its context; what it made so far is kept.
                await self._kill(work, session)
                artifacts, _ = await collector.settle()
                log.info("job cancelled while running", step_index=ctx.step_index)
                return Outcome(
                    JobStatus.CANCELLED,
                    result=ctx.result or None,
                    error=JobError(
                        kind="cancelled",
                        message="cancelled by the client while running",
                        step_index=ctx.step_index,
                    ),
                    artifacts=artifacts,
                )

            if self._abort.is_set():
                await self._kill(work, session)
                artifacts, _ = await collector.settle()
                error = JobError(
                    kind="interrupted",
                    message="the worker shut down before the job finished; it will run again",
                    retryable=True,
                    step_index=ctx.step_index,
                )
                return Outcome(
                    JobStatus.RETRY_SCHEDULED,
                    error=error,
                    artifacts=artifacts,
                    release_message=True,
                )

            # The watchdog: the run outlived job_timeout_s. Snapshot, then close the context
            # from outside the page, which ends whatever the step was waiting on.
            await capture_failure_screenshot(ctx)
            await self._kill(work, session)
            artifacts, _ = await collector.settle()
            timeout_s = request.options.job_timeout_s
            error = JobError(
                kind="timeout",
                message=f"the job ran longer than its job_timeout_s of {timeout_s} s",
                timeout="job",
                step_index=ctx.step_index,
                step=(
                    describe(request.steps[ctx.step_index], ctx)
                    if ctx.step_index is not None
                    else None
                ),
            )
            return Outcome(
                JobStatus.TIMED_OUT, result=ctx.result or None, error=error, artifacts=artifacts
            )
        finally:
            heartbeat.cancel()
            if session is not None:
                await session.close()

    def _lease_end(self, now: float) -> int:
        return int(now) + self.settings.lease_seconds - LEASE_MARGIN_S

    def _refusals_since(self, since: float) -> Callable[[], list[Decision]]:
        # The proxy serves both slots; a refusal after this job started is the likely cause.
        def refusals() -> list[Decision]:
            return [d for d in self.browsers.egress.refusals if d.at >= since]

        return refusals

    async def _watch_cancel(self, record: JobRecord) -> bool:
        """Poll the job's cancel flag; True once a client asked to cancel it."""
        if record.cancel_requested_at is not None:
            return True
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            try:
                if await asyncio.to_thread(
                    self._store.cancel_requested, record.tenant_id, record.job_id
                ):
                    return True
            except Exception as exc:  # a missed poll only delays the cancel by one period
                self._log.warning("cancel check failed", error=first_line(str(exc)))

    async def _kill(self, work: asyncio.Task[Any], session: BrowserSession) -> None:
        await session.close()
        work.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(work, 5)

    def _failed(
        self,
        record: JobRecord,
        failure: JobFailure,
        result: dict[str, Any],
        artifacts: list[Artifact],
    ) -> Outcome:
        error = failure.to_job_error()
        if failure.retryable and record.attempts_used < record.request.max_attempts:
            return Outcome(
                JobStatus.RETRY_SCHEDULED,
                result=result or None,
                error=error,
                artifacts=artifacts,
                retry_delay_s=record.request.retry.delay_seconds(record.attempts_used),
            )
        return Outcome(JobStatus.FAILED, result=result or None, error=error, artifacts=artifacts)

    async def _heartbeat(
        self, record: JobRecord, received: ReceivedMessage, lease_lost: asyncio.Event, log: JobLog
    ) -> None:
        settings = self.settings
        while True:
            await asyncio.sleep(settings.heartbeat_seconds)
            until = self._lease_end(self._clock())
            results = await asyncio.gather(
                asyncio.to_thread(
                    self._queue.change_visibility,
                    settings.pool,
                    received.receipt_handle,
                    settings.lease_seconds,
                ),
                asyncio.to_thread(
                    self._store.extend_lease,
                    record.tenant_id,
                    record.job_id,
                    attempt=record.attempt,
                    owner=record.lease_owner or self.worker_id,
                    lease_until=until,
                ),
                return_exceptions=True,
            )
            for outcome in results:
                if isinstance(outcome, LeaseLost):
                    lease_lost.set()
                    return
                if isinstance(outcome, BaseException):
                    log.warning("heartbeat failed", error=first_line(str(outcome)))

    # --- finishing ------------------------------------------------------------------------
    async def _finish(
        self,
        record: JobRecord,
        received: ReceivedMessage,
        outcome: Outcome,
        duration_ms: float,
        log: JobLog,
    ) -> None:
        at = iso(utcnow())
        history = AttemptRecord(
            attempt=record.attempt,
            worker=self.worker_id,
            started_at=record.started_at or at,
            finished_at=at,
            status=outcome.status,
            error=outcome.error,
        )
        retry_at = (
            int(self._clock()) + (outcome.retry_delay_s or 0)
            if outcome.status is JobStatus.RETRY_SCHEDULED
            else None
        )
        # Earlier attempts' artifacts (failure snapshots) stay listed next to this one's.
        artifacts = [a for a in record.artifacts if a.attempt != record.attempt]
        artifacts += outcome.artifacts
        try:
            await asyncio.to_thread(
                self._store.finish,
                record.tenant_id,
                record.job_id,
                attempt=record.attempt,
                owner=record.lease_owner or self.worker_id,
                status=outcome.status,
                at=at,
                result=outcome.result,
                artifacts=artifacts,
                error=outcome.error,
                history=history,
                retry_at=retry_at,
            )
        except (LeaseLost, IllegalTransition) as exc:
            if not await self._finish_landed(record, outcome):
                log.warning("outcome not written: the job moved on", reason=exc.message)
                return
        except Exception as exc:
            log.error("writing the outcome failed", error=first_line(str(exc)))
            return

        self.metrics.job_finished(outcome.status.value, duration_ms)
        if outcome.status is JobStatus.TIMED_OUT:
            self.metrics.count(metric.TIMEOUTS)
        fields: dict[str, Any] = {"status": outcome.status.value, "duration_ms": round(duration_ms)}
        if outcome.error is not None:
            fields.update(error_kind=outcome.error.kind, step_index=outcome.error.step_index)
        log.info("job finished", **fields)

        if outcome.release_message:
            await self._release(received)
            return
        if outcome.retry_delay_s is not None:
            self.metrics.count(metric.RETRIES)
            retry = JobMessage.for_job(record)
            try:
                await asyncio.to_thread(
                    self._queue.send, retry, delay_seconds=outcome.retry_delay_s
                )
            except Exception as exc:
                # Keep the original message: redelivered, it claims the retry_scheduled job.
                log.error("could not enqueue the retry", error=first_line(str(exc)))
                return
            log.info("retry scheduled", delay_s=outcome.retry_delay_s)
        # The outcome is durable; deleting the message need not hold up the slot.
        self._spawn(self._delete(received, log))

    async def _finish_landed(self, record: JobRecord, outcome: Outcome) -> bool:
        """After a refused finish: did our own earlier try land (its reply lost on the way)?"""
        try:
            current = await asyncio.to_thread(self._store.get, record.tenant_id, record.job_id)
        except Exception:
            return False
        return (
            current.attempt == record.attempt
            and current.status is outcome.status
            and any(a.attempt == record.attempt for a in current.attempts)
        )

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _delete(self, received: ReceivedMessage, log: JobLog) -> None:
        try:
            await asyncio.to_thread(self._queue.delete, self.settings.pool, received.receipt_handle)
        except Exception as exc:
            log.warning("deleting the message failed", error=first_line(str(exc)))

    async def _hide(self, received: ReceivedMessage, seconds: int) -> None:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(
                self._queue.change_visibility,
                self.settings.pool,
                received.receipt_handle,
                min(seconds, 43_200),
            )

    async def _release(self, received: ReceivedMessage) -> None:
        """Make a message visible again at once (we will not work on it)."""
        with contextlib.suppress(Exception):
            await asyncio.to_thread(
                self._queue.change_visibility, self.settings.pool, received.receipt_handle, 0
            )
