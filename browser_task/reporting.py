"""What the worker logs, counts and records about each message it handled and each job it
ran (the attempt's usage, for its tenant's bill)."""

from __future__ import annotations

import asyncio
from typing import Any

from browser_task.errors import first_line
from browser_task.telemetry import JobLog, WorkerMetrics
from browser_task.tenant_access import TenantDataSource
from browser_task.usage import AttemptMeter, attempt_usage
from pagefleet.jobs.lifecycle import Outcome, Step, Then
from pagefleet.jobs.models import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.specs import metrics_names as metric


def noted(step: Step, log: JobLog, metrics: WorkerMetrics) -> None:
    """Log (and count) what the lifecycle did with a message it did not let us run."""
    if step.status is not None:
        metrics.job_finished(step.status.value, 0.0)
    if step.then is Then.LEAVE:
        log.warning("message left for redelivery", reason=step.reason)
    else:
        log.info("message handled without running", then=step.then.value, reason=step.reason)


def finished_job(
    step: Step, outcome: Outcome, duration_ms: float, log: JobLog, metrics: WorkerMetrics
) -> None:
    """Log (and count) a job's outcome, once the lifecycle wrote it (or did not)."""
    if step.status is None:
        log.warning("outcome not written", reason=step.reason)
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
    if step.then is Then.LEAVE:
        log.warning("message left for redelivery", reason=step.reason)


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
