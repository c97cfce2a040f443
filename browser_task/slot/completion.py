"""After a run: the attempt's outcome written, logged and counted, the breakers told, its
usage recorded (for its tenant's bill).

This happens off the slot's path: the slot takes its next job once the browser context is
closed, while the run's uploads finish here and the outcome follows them. The job's lease is
kept until the outcome is written, then let go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from browser_task.egress.breakers import BreakerGate
from browser_task.errors import first_line
from browser_task.observe.reporting import attempt_ended
from browser_task.observe.run_events import RunEvents
from browser_task.observe.task_protection import TaskProtection
from browser_task.observe.telemetry import JobLog, WorkerMetrics
from browser_task.observe.usage import AttemptMeter, attempt_usage
from browser_task.slot.leases import LeaseKeeper
from browser_task.tenant.access import TenantDataSource
from pagefleet.jobs.lifecycle import Lifecycle, MessageAnswer, Outcome, Then
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.specs import metrics_names as metric


class Completion:
    def __init__(
        self,
        lifecycle: Lifecycle,
        worker_id: str,
        *,
        breaker: BreakerGate,
        tenant_data: TenantDataSource,
        protection: TaskProtection,
        metrics: WorkerMetrics,
        clock: Callable[[], float],
    ) -> None:
        self.lifecycle = lifecycle
        self.worker_id = worker_id
        self._breaker = breaker
        self._tenant_data = tenant_data
        self._protection = protection
        self.metrics = metrics
        self._clock = clock

    async def settle(
        self,
        run: asyncio.Future[Outcome | None],
        job: JobRecord,
        lease: LeaseKeeper,
        started: float,
        domain: str | None,
        probe: frozenset[str],
        log: JobLog,
        meter: AttemptMeter,
        events: RunEvents,
    ) -> None:
        """Wait for the rest of the run (its uploads), then complete the attempt."""
        try:
            outcome = await run
        except Exception:
            # Not written: the lease runs out and the job is taken back.
            log.exception("unexpected error finishing the job's run")
            await lease.stop()
            await self._protection.job_ended()
            return
        except BaseException:
            await lease.stop()
            await self._protection.job_ended()
            raise
        duration_ms = (time.monotonic() - started) * 1000
        try:
            await self._complete(
                job, outcome, lease, duration_ms, domain, probe, log, meter, events
            )
        finally:
            await lease.stop()

    async def _complete(
        self,
        job: JobRecord,
        outcome: Outcome | None,
        lease: LeaseKeeper,
        duration_ms: float,
        domain: str | None,
        probe: frozenset[str],
        log: JobLog,
        meter: AttemptMeter,
        events: RunEvents,
    ) -> None:
        ended = self._clock()  # the attempt's slot time ends with its outcome
        try:
            # Before the outcome's write: followers see the last events, then the status.
            if outcome is not None:
                error, delay = outcome.error, outcome.retry_delay_s
                attempt_ended(events, outcome.status.value, error, delay)
            await events.close()
            if outcome is None:
                await self.release_probe(domain, job.tenant_id, probe)
                return
            finished = await asyncio.to_thread(self.lifecycle.finish, job, outcome, self.worker_id)
            await lease.stop()  # written (or refused): the lease has nothing left to hold
            finished_job(finished, outcome, duration_ms, log, self.metrics)
            if domain is not None and outcome.status is not JobStatus.CANCELLED:
                await self._breaker.record(
                    domain,
                    job.tenant_id,
                    outcome.error,
                    probes=probe,
                    failed_origin=outcome.failed_origin,
                )
            elif probe:
                await self.release_probe(domain, job.tenant_id, probe)
        except Exception:
            log.exception("unexpected error completing the job")
        finally:
            await record_usage(self._tenant_data, job, outcome, meter, ended, log)
            await self._protection.job_ended()

    async def release_probe(self, domain: str | None, tenant: str, probe: frozenset[str]) -> None:
        """A probe that did not run says nothing: reopen the circuit for another cooldown."""
        if domain is not None and probe:
            await self._breaker.record(
                domain,
                tenant,
                JobError(kind="target_unavailable", message="probe not run", retryable=True),
                probes=probe,
            )


def finished_job(
    answer: MessageAnswer, outcome: Outcome, duration_ms: float, log: JobLog, metrics: WorkerMetrics
) -> None:
    """Log (and count) a job's outcome, once the lifecycle wrote it (or did not)."""
    if answer.status is None:
        log.warning("outcome not written", reason=answer.reason)
        return
    metrics.job_finished(outcome.status.value, duration_ms)
    if outcome.status is JobStatus.TIMED_OUT:
        metrics.count(metric.TIMEOUTS)
    fields: dict[str, Any] = {"status": outcome.status.value, "duration_ms": round(duration_ms)}
    if outcome.error is not None:
        fields.update(error_kind=outcome.error.kind, step_index=outcome.error.step_index)
    log.info("job finished", **fields)
    if outcome.retry_delay_s is not None and not outcome.release_message:
        metrics.count(metric.RETRIES)
        log.info("retry scheduled", delay_s=outcome.retry_delay_s)
    if answer.then is Then.LEAVE:
        log.warning("message left for redelivery", reason=answer.reason)


async def record_usage(
    tenant_data: TenantDataSource,
    job: JobRecord,
    outcome: Outcome | None,
    meter: AttemptMeter,
    ended: float,
    log: JobLog,
) -> None:
    """The attempt's usage, for its tenant (once per attempt, however often written)."""
    try:
        data = await asyncio.to_thread(tenant_data, job.tenant_id)
        if data.usage is not None:
            usage = attempt_usage(job, outcome, meter, ended=ended)
            await asyncio.to_thread(data.usage.record, usage)
    except Exception as exc:  # the job's outcome stands; only its bill misses an attempt
        log.warning("usage not recorded", error=first_line(str(exc)))
