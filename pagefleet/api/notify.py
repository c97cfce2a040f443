"""A tenant's completion webhook: its default address, signing secret and deliveries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.notify.ports import DeliveryAttempt
from pagefleet.view import View


class DeliveryList(View):
    job_id: str
    deliveries: list[DeliveryAttempt]


class NotifySettings(View):
    """A tenant's default completion webhook (used when a job sets no ``notify``)."""

    webhook: str | None = None


class NotifySettingsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    webhook: str | None = Field(default=None, max_length=2000, description="null: none")


class SigningSecret(View):
    """The tenant's webhook signing secret (HMAC-SHA256 key of ``Pagefleet-Signature``)."""

    secret: str
