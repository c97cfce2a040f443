"""The ports of completion notifications (adapters in ``pagefleet.adapters``, fakes in tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field


class DeliveryAttempt(BaseModel):
    """One POST of a webhook (``GET /v1/jobs/{id}/deliveries`` lists them)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    delivery_id: str = Field(description="the same for every attempt of one notification")
    attempt: int = Field(description="1 for the first POST, then each retry")
    at: str = Field(description="when the POST was made (ISO 8601, UTC)")
    url: str
    status: str = Field(description="delivered | failed | refused (not sent: the URL's checks)")
    status_code: int | None = Field(default=None, description="the receiver's HTTP status")
    error: str | None = Field(default=None, description="why it failed")
    duration_ms: int | None = None
    next_attempt_in_s: int | None = Field(
        default=None, description="when a failed delivery is tried again; null: never"
    )
    job_status: str | None = Field(default=None, description="the job's status notified")
    event: str | None = Field(
        default=None, description="job.finished, job.changed, schedule.alerting, ..."
    )


@dataclass(frozen=True)
class Mark:
    """A notification already handed on (``webhook#<delivery>``, ``event#<delivery>``): one
    per job and name; ``expires_at`` (epoch seconds) is when it may go."""

    tenant_id: str
    job_id: str
    name: str
    expires_at: int = field(default=0, compare=False)


class Deliveries(Protocol):
    """Delivery attempts and the marks that keep one notification from going out twice."""

    def record(
        self, tenant_id: str, job_id: str, attempt: DeliveryAttempt, *, expires_at: int
    ) -> None: ...

    def attempts(self, tenant_id: str, job_id: str) -> list[DeliveryAttempt]: ...

    def marked_many(self, marks: Sequence[Mark]) -> set[Mark]:
        """Those of ``marks`` (distinct) already made, read consistently."""
        ...

    def mark_many(self, marks: Sequence[Mark]) -> None:
        """Make ``marks`` (distinct); raises if some could not be (the others may be made)."""
        ...


class NotifyDefaults(Protocol):
    """A tenant's default notification (the webhook for jobs that set none)."""

    def get(self, tenant_id: str) -> str | None: ...

    def put(self, tenant_id: str, webhook: str | None) -> None: ...


class SigningSecrets(Protocol):
    """Each tenant's webhook signing secret (Secrets Manager), made on first use."""

    def get(self, tenant_id: str) -> str: ...

    def rotate(self, tenant_id: str) -> str: ...


class WebhookQueue(Protocol):
    """The webhook queue: one message per notification; a failed POST hides it (backoff)."""

    def send_many(self, messages: Sequence[dict[str, Any]]) -> list[str | None]:
        """Send ``messages`` in order; per message None (sent) or why it was not. What the
        queue refused or never got (a request that failed, and those after it) is told,
        not raised."""
        ...

    def retry_in(self, receipt_handle: str, seconds: int) -> None: ...


@dataclass(frozen=True)
class BusEvent:
    source: str
    detail_type: str
    detail: dict[str, Any]


class EventBus(Protocol):
    def put_many(self, events: Sequence[BusEvent]) -> list[str | None]:
        """Put ``events`` in order; per event None (accepted) or why it was not. What the bus
        refused or never got (a request that failed, and those after it) is told, not raised."""
        ...
