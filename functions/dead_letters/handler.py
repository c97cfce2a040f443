"""DLQ consumer: marks each dead-lettered job with the reason (SQS event, partial batch)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from pagefleet.adapters.sqs import parse_message
from pagefleet.jobs.recovery import mark_dead_lettered
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.settings import CoreSettings

logger = Logger(service="pagefleet-dead-letters")
processor = BatchProcessor(event_type=EventType.SQS)


def services() -> JobServices:
    return RUNTIME.job_services(RUNTIME.settings(CoreSettings))


def record_handler(record: SQSRecord) -> str:
    received = parse_message(record.raw_event)
    if received.message is not None:
        logger.set_correlation_id(received.message.correlation_id)
    outcome = mark_dead_lettered(services(), received)
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


def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
