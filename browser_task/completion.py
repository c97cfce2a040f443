"""After a run: the attempt's outcome written, the breakers told, its usage recorded.

This happens off the slot's path: the slot takes its next job once the browser context is
closed, while the run's uploads finish here and the outcome follows them. The job's lease is
kept until the outcome is written, then let go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from browser_task.breaker_gate import BreakerGate
from browser_task.leases import LeaseKeeper
from browser_task.reporting import finished_job, record_usage
from browser_task.run_events import RunEvents, attempt_ended
from browser_task.task_protection import TaskProtection
from browser_task.telemetry import JobLog, WorkerMetrics
from browser_task.tenant_access import TenantDataSource
from browser_task.usage import AttemptMeter
from pagefleet.jobs.lifecycle import Lifecycle, Outcome
from pagefleet.jobs.models import JobError, JobRecord
from pagefleet.jobs.states import JobStatus


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
                await self._breaker.record(domain, job.tenant_id, outcome.error, probes=probe)
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
