"""Parts of a job's request that stand on their own: its retry policy and its
notifications (``pagefleet.jobs.models`` re-exports them)."""

from __future__ import annotations

import random
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from pagefleet.backoff import Backoff, Jitter
from pagefleet.targets.egress_policy import url_problem


class RetryPolicy(BaseModel):
    """Exponential backoff with full jitter: delay ~ U(0, min(cap, base * 2**(n-1)))."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    base_seconds: float = Field(
        default=2.0, gt=0, le=300, description="the first retry's longest wait"
    )
    cap_seconds: float = Field(  # SQS delays stop at 15 minutes
        default=300.0, gt=0, le=900, description="no wait is longer"
    )

    @model_validator(mode="after")
    def _base_below_cap(self) -> RetryPolicy:
        if self.base_seconds > self.cap_seconds:
            raise ValueError("RetryPolicy needs 0 < base_seconds <= cap_seconds")
        return self

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.base_seconds, self.cap_seconds, Jitter.FULL)

    def ceiling(self, attempt: int) -> float:
        return self.backoff.ceiling(attempt)

    def delay_seconds(self, attempt: int, rng: random.Random | None = None) -> int:
        """Whole seconds (SQS DelaySeconds), in [0, ceiling(attempt)]."""
        return int(self.backoff.delay(attempt, rng))


# What a webhook can be sent for (README: "Notifications"): ``finished`` every final state,
# ``changed`` a run whose changes say changed, ``failed`` a failed run (a schedule with
# ``alert``: once, when it turns alerting), ``recovered`` a schedule's first success after
# alerting, ``needs_review`` a job that waits for a person (an irreversible step's outcome
# is unknown), ``waiting_for_human`` a job an await_human step parked.
NotifyTopic = Literal[
    "finished", "changed", "failed", "recovered", "needs_review", "waiting_for_human"
]
NOTIFY_TOPICS: tuple[NotifyTopic, ...] = get_args(NotifyTopic)
DEFAULT_TOPICS: tuple[NotifyTopic, ...] = ("finished",)


class Notify(BaseModel):
    """Where and when to tell the client about a job (README: "Notifications")."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    webhook: str | None = Field(
        default=None,
        max_length=2000,
        description=(
            "http(s) URL that gets a signed POST for each event in `on`; null: none, not even "
            "the tenant's default; omitted: the tenant's default"
        ),
    )
    on: list[NotifyTopic] = Field(
        default_factory=lambda: list(DEFAULT_TOPICS),
        min_length=1,
        max_length=len(NOTIFY_TOPICS),
        description="finished | changed | failed | recovered | needs_review | waiting_for_human",
    )

    @field_validator("on")
    @classmethod
    def _once_each(cls, topics: list[NotifyTopic]) -> list[NotifyTopic]:
        return list(dict.fromkeys(topics))

    @model_serializer(mode="wrap")
    def _unset_webhook_stays_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        # "webhook": null means "none at all", an omitted webhook the tenant's default: the
        # stored request must keep that difference.
        data = handler(self)
        if isinstance(data, dict) and "webhook" not in self.model_fields_set:
            data.pop("webhook", None)
        return data

    @property
    def own_webhook(self) -> bool:
        """True when the job names its webhook (or none): the tenant's default is not used."""
        return "webhook" in self.model_fields_set

    @field_validator("webhook")
    @classmethod
    def _callable_url(cls, url: str | None) -> str | None:
        # The address checks (SSRF) need a lookup: the service runs them at submit and send.
        problem = url_problem(url) if url is not None else None
        if problem is not None:
            raise ValueError(problem)
        return url
