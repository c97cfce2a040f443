"""The jobs table's one stream reader: every job change goes to each consumer in turn.

Consumers (dependants' release, live delivery, notifications) are idempotent. The batch is
reported failed from the first record that actually failed (``ReportBatchItemFailures``):
the records before it are done, and Lambda hands it and the rest to every consumer again,
bisecting a batch that makes no progress, so one bad record ends alone in the
failed-batches queue. The event source mapping's filter (``JOBS_STREAM_FILTERS``) invokes
this only for job records and run events.
"""

from __future__ import annotations

from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics

    from functions.lambda_context import lambda_entry
    from functions.xray import function_tracer
    from pagefleet.adapters.dynamodb.stream import read_records
    from pagefleet.jobs.changes import ChangeConsumer, deliver_in_order
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import ChangesSettings

SERVICE = "pagefleet-job-changes"
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
tracer = function_tracer(SERVICE)


def consumers() -> list[ChangeConsumer]:
    """Every part that reacts to a job's change, built once per execution environment."""
    settings = RUNTIME.settings(ChangesSettings)
    return list(RUNTIME.change_consumers(settings))


@lambda_entry(SERVICE)
@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    read = read_records(event.get("Records") or [])
    ready = consumers()  # built on the first invocation, even an empty one (a warm-up)
    failed_at = deliver_in_order(read, ready)
    logger.info(
        "job changes",
        extra={
            "records": len(read),
            "changes": sum(r.change is not None for r in read),
            "event_items": sum(r.events is not None for r in read),
            "failed_at": failed_at,
        },
    )
    return {"batchItemFailures": [{"itemIdentifier": failed_at}] if failed_at else []}
