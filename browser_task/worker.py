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
from browser_task.browser import BrowserPool, BrowserSession
from browser_task.context import RunContext, SecretsResolver
from browser_task.egress import EgressGuard, Resolver, system_resolver
from browser_task.errors import (
    DEFAULT_RETRY_POLICY,
    JobFailure,
    RetryJob,
    RetryPolicy,
    RotateBrowser,
    first_line,
)
from browser_task.executor import (
    TenantPolicies,
    capture_failure_screenshot,
    describe,
    install_egress_guard,
    prepare_run,
    run_workflow,
)
from browser_task.secrets import SecretsManagerResolver
from browser_task.sessions import S3SessionStore, SessionStore
from browser_task.telemetry import JobLog, WorkerMetrics
from pagefleet import aws
from pagefleet import metrics_names as metric
from pagefleet.adapters.sqs import ReceivedMessage
from pagefleet.errors import IllegalTransition, LeaseLost, NotFound
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.models import (
    Artifact,
    AttemptRecord,
    JobError,
    JobMessage,
    JobRecord,
    iso,
    utcnow,
)
from pagefleet.settings import WorkerSettings

# After a drain gave up on a job, how long its slot may take to hand the job back.
ABORT_GRACE_S = 15.0


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
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
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
        self._retry = retry_policy
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
            if self._background:
                await asyncio.wait(self._background, timeout=10)
        finally:
            for task in slots:
                task.cancel()
            await self.browsers.close()
            flusher.cancel()
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
        try:
            record = await asyncio.to_thread(
                self._store.claim,
                message.tenant_id,
                message.job_id,
                owner=self.worker_id,
                lease_until=int(now) + self.settings.lease_seconds,
                now=int(now),
                started_at=iso(utcnow()),
            )
        except NotFound:
            log.warning("job not found; deleting its message")
            await self._delete(received, log)
            return
        except IllegalTransition:
            await self._claim_refused(message, received, now, log)
            return
        except Exception as exc:
            log.error("claim failed; the message will be redelivered", error=first_line(str(exc)))
            return
        log = log.bind(attempt=record.attempt)
        if received.sent_at_ms:
            self.metrics.queue_delay(now * 1000 - received.sent_at_ms)
        started = time.monotonic()
        log.info("job started", receive_count=received.receive_count)
        outcome = await self._run(record, received, log)
        self.jobs_handled += 1
        if outcome is None:
            return
        await self._finish(record, received, outcome, (time.monotonic() - started) * 1000, log)

    async def _claim_refused(
        self, message: JobMessage, received: ReceivedMessage, now: float, log: JobLog
    ) -> None:
        try:
            current = await asyncio.to_thread(self._store.get, message.tenant_id, message.job_id)
        except NotFound:
            await self._delete(received, log)
            return
        lease_live = current.status is JobStatus.RUNNING and (current.lease_expires_at or 0) >= int(
            now
        )
        if current.status.is_final or lease_live:
            log.info("duplicate delivery; deleting the message", status=current.status.value)
            await self._delete(received, log)
        else:
            log.info("job cannot start now; leaving the message", status=current.status.value)

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
            try:
                session = await self.browsers.new_session(
                    request.options, storage_state=prepared.storage_state
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
                guard=EgressGuard(
                    allow_loopback=self.settings.allow_loopback, resolver=self._resolver
                ),
                artifacts=collector,
                secrets=self._secrets,
                sessions=self._sessions,
                prepared=prepared,
            )
            await install_egress_guard(ctx)
            work = asyncio.create_task(run_workflow(ctx), name=f"job {record.job_id}")
            lost = asyncio.create_task(lease_lost.wait())
            abort = asyncio.create_task(self._abort.wait())
            try:
                await asyncio.wait(
                    {work, lost, abort},
                    timeout=request.options.job_timeout_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                lost.cancel()
                abort.cancel()

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
        if failure.retryable and record.attempt < record.request.max_attempts:
            return Outcome(
                JobStatus.RETRY_SCHEDULED,
                result=result or None,
                error=error,
                artifacts=artifacts,
                retry_delay_s=self._retry.delay_seconds(record.attempt),
            )
        return Outcome(JobStatus.FAILED, result=result or None, error=error, artifacts=artifacts)

    async def _heartbeat(
        self, record: JobRecord, received: ReceivedMessage, lease_lost: asyncio.Event, log: JobLog
    ) -> None:
        settings = self.settings
        while True:
            await asyncio.sleep(settings.heartbeat_seconds)
            until = int(self._clock()) + settings.lease_seconds
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
                    owner=self.worker_id,
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
        # Earlier attempts' artifacts (failure snapshots) stay listed next to this one's.
        artifacts = [a for a in record.artifacts if a.attempt != record.attempt]
        artifacts += outcome.artifacts
        try:
            await asyncio.to_thread(
                self._store.finish,
                record.tenant_id,
                record.job_id,
                attempt=record.attempt,
                owner=self.worker_id,
                status=outcome.status,
                at=at,
                result=outcome.result,
                artifacts=artifacts,
                error=outcome.error,
                history=history,
            )
        except (LeaseLost, IllegalTransition) as exc:
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
            retry = JobMessage(
                tenant_id=record.tenant_id,
                job_id=record.job_id,
                attempt=record.attempt,
                correlation_id=record.correlation_id,
                pool=record.pool,
            )
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

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _delete(self, received: ReceivedMessage, log: JobLog) -> None:
        try:
            await asyncio.to_thread(self._queue.delete, self.settings.pool, received.receipt_handle)
        except Exception as exc:
            log.warning("deleting the message failed", error=first_line(str(exc)))

    async def _release(self, received: ReceivedMessage) -> None:
        """Make a message visible again at once (we will not work on it)."""
        with contextlib.suppress(Exception):
            await asyncio.to_thread(
                self._queue.change_visibility, self.settings.pool, received.receipt_handle, 0
            )
