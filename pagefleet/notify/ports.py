"""The ports of completion notifications (adapters in ``pagefleet.adapters``, fakes in tests)."""

from __future__ import annotations

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


class Deliveries(Protocol):
    """Delivery attempts and the marks that keep one notification from going out twice."""

    def record(
        self, tenant_id: str, job_id: str, attempt: DeliveryAttempt, *, expires_at: int
    ) -> None: ...

    def attempts(self, tenant_id: str, job_id: str) -> list[DeliveryAttempt]: ...

    def marked(self, tenant_id: str, job_id: str, mark: str) -> bool: ...

    def mark(self, tenant_id: str, job_id: str, mark: str, *, expires_at: int) -> None: ...


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

    def send(self, message: dict[str, Any]) -> None: ...

    def retry_in(self, receipt_handle: str, seconds: int) -> None: ...


class EventBus(Protocol):
    def put(self, *, source: str, detail_type: str, detail: dict[str, Any]) -> None: ...
