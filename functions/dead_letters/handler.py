"""DLQ consumer: marks each dead-lettered job with the reason (SQS event, partial batch)."""

from __future__ import annotations

from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
    from aws_lambda_powertools.utilities.batch import (
        BatchProcessor,
        EventType,
        process_partial_response,
    )
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from functions.lambda_context import lambda_entry
    from functions.xray import function_tracer
    from pagefleet.adapters.sqs import parse_message
    from pagefleet.jobs.service import JobServices
    from pagefleet.jobs.sweeper import mark_dead_lettered
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import CoreSettings

SERVICE = metrics_names.DEAD_LETTERS_SERVICE
logger = Logger(service=SERVICE)
# The alarm on dead-lettered jobs matches this namespace, metric name and service dimension.
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
tracer = function_tracer(SERVICE)
processor = BatchProcessor(event_type=EventType.SQS)
# The job's correlation id travels as a message attribute; each record re-sets it below.
CORRELATION_ID_PATH = "Records[0].messageAttributes.correlation_id.stringValue"


def services() -> JobServices:
    return RUNTIME.job_services(RUNTIME.settings(CoreSettings))


def record_handler(record: SQSRecord) -> str:
    received = parse_message(record.raw_event)
    if received.message is not None:
        logger.set_correlation_id(received.message.correlation_id)
    outcome = mark_dead_lettered(services(), received)
    if outcome == "marked":
        metrics.add_metric(name=metrics_names.DEAD_LETTERED, unit=MetricUnit.Count, value=1)
    # Only ids and counts are logged: a poison body may hold anything.
    logger.info(
        "dead letter",
        extra={
            "outcome": outcome,
            "message_id": received.message_id,
            "receive_count": received.receive_count,
            "job_id": received.message.job_id if received.message else None,
        },
    )
    return outcome


@lambda_entry(SERVICE)
@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
