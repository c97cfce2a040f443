"""The webhook sender: each SQS record is one notification to POST, signed.

A delivery is deleted from the queue; a failed POST is hidden for its backoff (the message's
visibility) and reported failed, so SQS offers it again then, and after the queue's receive
limit moves it to the DLQ. A URL the egress policy refuses is recorded and not retried.
"""

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
    from pagefleet.notify.sender import WebhookMessage, receive_count
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import WebhookSettings

SERVICE = metrics_names.WEBHOOKS_SERVICE
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
tracer = function_tracer(SERVICE, http=True)
processor = BatchProcessor(event_type=EventType.SQS)


class RetryLater(Exception):
    """The POST failed; the message is hidden until its next attempt."""


def record_handler(record: SQSRecord) -> str:
    settings = RUNTIME.settings(WebhookSettings)
    sender, queue = RUNTIME.webhook_sender(settings)
    message = WebhookMessage.parse(record.body)
    attempt = receive_count(record.raw_event)
    result = sender.send(message, attempt=attempt)
    outcome = result.attempt.status
    metrics.add_metric(name=metrics_names.WEBHOOK_OUTCOMES[outcome], unit=MetricUnit.Count, value=1)
    # Ids, outcome, status and what a failed attempt got (the receiver's answer, the
    # connection's error, the egress refusal), never the URL: its query and the body may
    # hold anything.
    logger.info(
        "webhook attempt",
        extra={
            "job_id": message.job_id,
            "tenant_id": message.tenant_id,
            "delivery_id": message.delivery_id,
            "attempt": attempt,
            "outcome": outcome,
            "status_code": result.attempt.status_code,
            "error": result.attempt.error,
            "retry_in_s": result.retry_in_s,
        },
    )
    if result.retry_in_s is not None:
        queue.retry_in(record.receipt_handle, result.retry_in_s)
        raise RetryLater(f"attempt {attempt} failed; next in {result.retry_in_s} s")
    if outcome == "failed":
        queue.retry_in(record.receipt_handle, 1)  # the next receive moves it to the DLQ
        raise RetryLater(f"attempt {attempt} failed; giving up (dead-letter queue)")
    return outcome


@lambda_entry(SERVICE)
@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    RUNTIME.webhook_sender(RUNTIME.settings(WebhookSettings))  # built once (a warm-up too)
    if not event.get("Records"):
        return {"batchItemFailures": []}
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
