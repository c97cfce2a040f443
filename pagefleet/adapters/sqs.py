"""SQS job queues, one per worker pool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pagefleet.jobs.ports import SQS_BATCH_MAX, ReceivedMessage
from pagefleet.jobs.record import JobMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

CORRELATION_ATTR = "correlation_id"


class SqsJobQueue:
    def __init__(self, client: SQSClient, queue_urls: Mapping[str, str]) -> None:
        self._sqs = client
        self._urls = dict(queue_urls)

    def url(self, queue: str) -> str:
        return self._urls[queue]

    def send(self, message: JobMessage, *, delay_seconds: int = 0) -> str:
        resp = self._sqs.send_message(
            QueueUrl=self._urls[message.queue],
            MessageBody=message.body(),
            DelaySeconds=max(0, min(delay_seconds, 900)),
            # SQS fair queues: on a standard queue the group is the tenant, so one tenant's
            # backlog does not hold back the messages of the others (no ordering implied).
            MessageGroupId=message.tenant_id,
            MessageAttributes={
                CORRELATION_ATTR: {"DataType": "String", "StringValue": message.correlation_id}
            },
        )
        return str(resp["MessageId"])

    def receive(
        self, queue: str, *, max_messages: int, wait_seconds: int, visibility: int
    ) -> list[ReceivedMessage]:
        resp = self._sqs.receive_message(
            QueueUrl=self._urls[queue],
            MaxNumberOfMessages=max(1, min(max_messages, 10)),
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=visibility,
            MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
            MessageAttributeNames=["All"],
        )
        return [parse_message(dict(m), queue) for m in resp.get("Messages", [])]

    def delete(self, queue: str, receipt_handle: str) -> None:
        self._sqs.delete_message(QueueUrl=self._urls[queue], ReceiptHandle=receipt_handle)

    def delete_batch(self, queue: str, receipt_handles: list[str]) -> list[str]:
        failed: list[str] = []
        for first in range(0, len(receipt_handles), SQS_BATCH_MAX):
            handles = receipt_handles[first : first + SQS_BATCH_MAX]
            failed += [h for h, _ in delete_together(self._sqs, self._urls[queue], handles)]
        return failed

    def change_visibility(self, queue: str, receipt_handle: str, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._urls[queue], ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )


def delete_together(sqs: SQSClient, url: str, handles: list[str]) -> list[tuple[str, bool]]:
    """One DeleteMessageBatch of at most ``SQS_BATCH_MAX`` receipt handles: those refused,
    each with whether SQS called it the sender's fault (a stale receipt: trying again changes
    nothing)."""
    resp = sqs.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
    )
    return [(handles[int(f["Id"])], bool(f.get("SenderFault"))) for f in resp.get("Failed", [])]


def parse_message(raw: Mapping[str, Any], queue: str = "") -> ReceivedMessage:
    """Accept both the SQS API shape and the Lambda SQS event record shape."""
    body = raw.get("Body", raw.get("body", ""))
    attrs = raw.get("Attributes", raw.get("attributes", {})) or {}
    try:
        message: JobMessage | None = JobMessage.model_validate_json(body)
    except ValueError:
        message = None
    return ReceivedMessage(
        message=message,
        receipt_handle=raw.get("ReceiptHandle", raw.get("receiptHandle", "")),
        message_id=raw.get("MessageId", raw.get("messageId", "")),
        receive_count=int(attrs.get("ApproximateReceiveCount", 1)),
        sent_at_ms=int(attrs.get("SentTimestamp", 0)),
        body=body,
        queue=queue,
    )
