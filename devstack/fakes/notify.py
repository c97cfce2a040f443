"""In-memory notification ports (held to the adapters by tests/contract/test_notify_stores.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pagefleet.adapters.dynamodb.batches import BATCH_GET_MAX, BATCH_WRITE_MAX
from pagefleet.adapters.notify import PUT_EVENTS_MAX
from pagefleet.notify.ports import BusEvent, DeliveryAttempt, Mark
from pagefleet.notify.signing import new_secret


class FakeDeliveries:
    def __init__(self) -> None:
        self.records: dict[tuple[str, str], list[DeliveryAttempt]] = {}
        self.marks: set[Mark] = set()
        self.requests = 0  # reads and writes of marks, each a request as the adapter's

    def record(
        self, tenant_id: str, job_id: str, attempt: DeliveryAttempt, *, expires_at: int
    ) -> None:
        self.records.setdefault((tenant_id, job_id), []).append(attempt)

    def attempts(self, tenant_id: str, job_id: str) -> list[DeliveryAttempt]:
        return sorted(self.records.get((tenant_id, job_id), []), key=lambda a: (a.at, a.attempt))

    def marked_many(self, marks: Sequence[Mark]) -> set[Mark]:
        self.requests += -(-len(marks) // BATCH_GET_MAX)
        return {m for m in marks if m in self.marks}

    def mark_many(self, marks: Sequence[Mark]) -> None:
        self.requests += -(-len(marks) // BATCH_WRITE_MAX)
        self.marks.update(marks)


class FakeNotifyDefaults:
    def __init__(self) -> None:
        self.webhooks: dict[str, str] = {}

    def get(self, tenant_id: str) -> str | None:
        return self.webhooks.get(tenant_id)

    def put(self, tenant_id: str, webhook: str | None) -> None:
        if webhook is None:
            self.webhooks.pop(tenant_id, None)
        else:
            self.webhooks[tenant_id] = webhook


class FakeSigningSecrets:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, tenant_id: str) -> str:
        return self.values.setdefault(tenant_id, new_secret())

    def rotate(self, tenant_id: str) -> str:
        self.values[tenant_id] = new_secret()
        return self.values[tenant_id]


def _told(refused: Callable[[Any], str | None] | None, items: Sequence[Any]) -> list[str | None]:
    return [refused(i) if refused is not None else None for i in items]


class FakeWebhookQueue:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.hidden: dict[str, int] = {}
        # Tests: why SQS refuses a message (None: sent), as SendMessageBatch's Failed tells.
        self.refusing: Callable[[dict[str, Any]], str | None] | None = None

    def send_many(self, messages: Sequence[dict[str, Any]]) -> list[str | None]:
        told = _told(self.refusing, messages)
        self.sent += [m for m, t in zip(messages, told, strict=True) if t is None]
        return told

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        self.hidden[receipt_handle] = seconds


class FakeEventBus:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.requests = 0  # PutEvents calls, as the adapter makes them (ten entries each)
        # Tests: why EventBridge refuses an event (None: accepted), as an entry's ErrorCode.
        self.refusing: Callable[[BusEvent], str | None] | None = None

    def put_many(self, events: Sequence[BusEvent]) -> list[str | None]:
        self.requests += -(-len(events) // PUT_EVENTS_MAX)
        # EventBridge refuses an entry without a DetailType (InvalidArgument), as moto does.
        told = [
            told if e.detail_type else "InvalidArgument DetailType is a required argument"
            for e, told in zip(events, _told(self.refusing, events), strict=True)
        ]
        for event, t in zip(events, told, strict=True):
            if t is None:
                self.events.append(
                    {
                        "source": event.source,
                        "detail-type": event.detail_type,
                        "detail": event.detail,
                    }
                )
        return told
