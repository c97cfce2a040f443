"""In-memory notification ports (held to the adapters by tests/contract/test_notify_stores.py)."""

from __future__ import annotations

from typing import Any

from pagefleet.notify.ports import DeliveryAttempt
from pagefleet.notify.signing import new_secret


class FakeDeliveries:
    def __init__(self) -> None:
        self.records: dict[tuple[str, str], list[DeliveryAttempt]] = {}
        self.marks: set[tuple[str, str, str]] = set()

    def record(
        self, tenant_id: str, job_id: str, attempt: DeliveryAttempt, *, expires_at: int
    ) -> None:
        self.records.setdefault((tenant_id, job_id), []).append(attempt)

    def attempts(self, tenant_id: str, job_id: str) -> list[DeliveryAttempt]:
        return sorted(self.records.get((tenant_id, job_id), []), key=lambda a: (a.at, a.attempt))

    def marked(self, tenant_id: str, job_id: str, mark: str) -> bool:
        return (tenant_id, job_id, mark) in self.marks

    def mark(self, tenant_id: str, job_id: str, mark: str, *, expires_at: int) -> None:
        self.marks.add((tenant_id, job_id, mark))


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


class FakeWebhookQueue:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.hidden: dict[str, int] = {}

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        self.hidden[receipt_handle] = seconds


class FakeEventBus:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def put(self, *, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        self.events.append({"source": source, "detail-type": detail_type, "detail": detail})
