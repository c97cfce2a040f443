"""EventBridge Scheduler's target: one fire of one schedule -> one job (idempotent).

The Scheduler invokes this with the schedule's target input, ``{tenant_id, schedule_id,
scheduled_time}`` (the scheduled time is the Scheduler's own context attribute, the same on
every retry of a fire), so a retried invocation finds the job the first one made.
"""

from __future__ import annotations

from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
    from pydantic import BaseModel, ConfigDict, Field

    from functions.lambda_context import lambda_entry
    from functions.xray import function_tracer
    from pagefleet import ids
    from pagefleet.errors import NotFound
    from pagefleet.jobs.states import JobStatus
    from pagefleet.runtime import RUNTIME
    from pagefleet.schedules import runs
    from pagefleet.schedules import service as schedules
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import CoreSettings

SERVICE = "pagefleet-scheduler"
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
tracer = function_tracer(SERVICE)


class Fire(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tenant_id: str = Field(pattern=ids.TENANT_ID)
    schedule_id: str = Field(pattern=ids.SCHEDULE_ID)
    scheduled_time: str = Field(min_length=10, max_length=40)


@lambda_entry(SERVICE)
@logger.inject_lambda_context(correlation_id_path="schedule_id")
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    fire = Fire.model_validate(event)
    settings = RUNTIME.settings(CoreSettings)
    svc = RUNTIME.job_services(settings)
    store = RUNTIME.schedule_store(settings)
    quotas = RUNTIME.tenancy(settings).quotas

    def submit(job: dict[str, Any], key: str) -> str:
        submitted = runs.submit_run(
            svc,
            quotas,
            fire.tenant_id,
            (fire.schedule_id, fire.scheduled_time),
            job,
            idempotency_key=key,
            by_hand=False,
        )
        return submitted.job.job_id

    def job_status(job_id: str) -> JobStatus | None:
        try:
            return svc.store.get(fire.tenant_id, job_id, consistent=False).status
        except Exception:
            return None

    try:
        fired = schedules.fire(
            store,
            svc.clock,
            fire.tenant_id,
            fire.schedule_id,
            fire.scheduled_time,
            submit=submit,
            job_status=job_status,
        )
    except NotFound:
        # Deleted between the Scheduler's fire and now: nothing to run, nothing to retry.
        logger.info("schedule gone", extra=fire.model_dump())
        return {"skipped": "the schedule no longer exists"}
    if fired.repeated:
        # Lambda invoked this fire again: it made nothing now, and was counted when it did.
        logger.info("schedule fire repeated", extra=fire.model_dump())
        return {"repeated": True, **fire.model_dump()}
    run = fired.run
    metrics.add_metric(
        name="ScheduleFires" if run.job_id else "ScheduleSkips", unit=MetricUnit.Count, value=1
    )
    logger.info("schedule fired", extra=run.model_dump())
    return run.model_dump()
