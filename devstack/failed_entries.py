"""Batch calls of SQS and EventBridge with an entry that failed, as AWS may answer them.

SQS reports each entry of a SendMessageBatch and a DeleteMessageBatch on its own: "Because
the batch request can result in a combination of successful and unsuccessful actions, you
should check for batch errors even when the call returns an HTTP status code of 200"
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html,
.../API_DeleteMessageBatch.html). EventBridge's PutEvents goes on past an entry that failed,
and "you must detect unsuccessful entries and include them in a subsequent call"
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html); its retryable
codes are ``InternalFailure`` and ``ThrottlingException``. moto fails an entry only for a
fault of the entry itself (a bad delay, an unknown receipt handle, a missing source), so a
caller that took a 200 for all done always worked here.

Here, a ``share`` of these batches of two entries or more (within AWS's ten) fail their last
entry as the service does for a fault of its own (SQS: ``InternalError``, not the sender's
fault; EventBridge: ``InternalFailure``): the message is not sent, not deleted, the event not
put. The entry is checked as the service checks it first, so a batch AWS refuses whole is
still refused whole. Counted, not drawn (one batch in ``1 / share``), so runs repeat. Off by
default; on with the duplicates (``devstack.strict_aws.at_least_once``) and in the tests
that need it (``batch_entry_failure_share``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from devstack.counted_share import CountedShare

# AWS's most entries a batch, SQS's and EventBridge's alike (bigger ones are refused whole;
# devstack.strict_aws refuses them with this figure too).
BATCH_MAX = 10
SQS_FAILURE = {"SenderFault": False, "Code": "InternalError", "Message": "Internal error"}
EVENTS_FAILURE = {"ErrorCode": "InternalFailure", "ErrorMessage": "Internal failure"}

# The batches chosen to fail an entry (devstack.strict_aws resets and reads it).
FAILED = CountedShare()


def fail_some_entries(share: Callable[[], float]) -> None:
    """From now on ``share()`` of the SQS and EventBridge batches fail their last entry."""
    from moto.events.models import EventsBackend
    from moto.sqs.models import SQSBackend

    send_batch = SQSBackend.send_message_batch
    delete_batch = SQSBackend.delete_message_batch
    put_events = EventsBackend.put_events

    def send(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        if not _chosen(len(entries), share):
            return send_batch(self, queue_name, entries)
        *kept, last = entries
        held = entries[last]
        _check_entry(self, queue_name, held, [entries[k]["Id"] for k in entries])
        messages, failed = send_batch(self, queue_name, {k: entries[k] for k in kept})
        return messages, [*failed, {"Id": held["Id"], **SQS_FAILURE}]

    def delete(self: Any, queue_name: str, receipts: list[dict[str, Any]]) -> Any:
        if not _chosen(len(receipts), share):
            return delete_batch(self, queue_name, receipts)
        done, failed = delete_batch(self, queue_name, receipts[:-1])
        return done, [*failed, {"Id": receipts[-1]["Id"], **SQS_FAILURE}]

    def put(self: Any, events: list[dict[str, Any]]) -> Any:
        if not _chosen(len(events), share):
            return put_events(self, events)
        return [*put_events(self, events[:-1]), dict(EVENTS_FAILURE)]

    SQSBackend.send_message_batch = send  # type: ignore[method-assign]
    SQSBackend.delete_message_batch = delete  # type: ignore[method-assign]
    EventsBackend.put_events = put  # type: ignore[method-assign]


def _chosen(entries: int, share: Callable[[], float]) -> bool:
    return 2 <= entries <= BATCH_MAX and FAILED.next(share())


def _check_entry(backend: Any, queue_name: str, entry: dict[str, Any], ids: list[str]) -> None:
    """What SQS checks of a batch's entry before it sends any (moto's own checks, as its
    send_message_batch makes them), raised as moto raises them."""
    from moto.sqs.exceptions import BatchEntryIdsNotDistinct, InvalidBatchEntryId

    if not re.match(r"^[\w-]{1,80}$", entry["Id"]):
        raise InvalidBatchEntryId()
    if ids.count(entry["Id"]) > 1:
        raise BatchEntryIdsNotDistinct(entry["Id"])
    backend._validate_message(
        backend.get_queue(queue_name),
        entry["MessageBody"],
        int(entry.get("DelaySeconds") or 0),
        entry.get("MessageDeduplicationId"),
        entry.get("MessageGroupId"),
    )
