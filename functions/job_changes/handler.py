"""The jobs table's one stream reader: every job change goes to each consumer in turn.

Consumers (dependants' release, live delivery, notifications) are idempotent; when one
fails, the batch is reported failed from its first record, so Lambda hands the whole batch
to every consumer again (``ReportBatchItemFailures`` on the event source mapping).
"""

from __future__ import annotations

from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics

    from functions.lambda_context import lambda_entry
    from functions.xray import function_tracer
    from pagefleet.adapters.dynamodb.stream import event_writes, job_changes
    from pagefleet.jobs.changes import ChangeConsumer, deliver
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import ChangesSettings

SERVICE = "pagefleet-job-changes"
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.NAMESPACE, service=SERVICE)
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
    records = event.get("Records") or []
    changes = job_changes(records)
    written = event_writes(records)
    ready = consumers()  # built on the first invocation, even an empty one (a warm-up)
    failed = deliver(changes, ready, written) if changes or written else []
    logger.info(
        "job changes",
        extra={"records": len(records), "changes": len(changes), "event_items": len(written)},
    )
    if failed and records:
        first = str((records[0].get("dynamodb") or {}).get("SequenceNumber", ""))
        return {"batchItemFailures": [{"itemIdentifier": first}]}
    return {"batchItemFailures": []}
