"""Circuit breaker per target domain, shared by every worker through DynamoDB.

closed --(failure rate over the window)--> open --(cooldown)--> half_open (one probe job)
half_open --probe succeeds--> closed;  half_open --probe fails--> open again.

While a domain is open its jobs are deferred (their message is re-sent with a delay and
the job stays queued with a reason), never failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, Field


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class BreakerPolicy(BaseModel):
    window_s: int = Field(default=60, ge=1)
    min_requests: int = Field(default=5, ge=1)
    failure_rate: float = Field(default=0.5, gt=0, le=1)
    cooldown_s: int = Field(default=30, ge=1)
    # A probe that never reported (its worker died) is replaced after this long.
    probe_timeout_s: int = Field(default=300, ge=1)


@dataclass(frozen=True)
class Admission:
    allowed: bool
    probe: bool = False
    retry_after_s: int = 0
    state: BreakerState = BreakerState.CLOSED


@dataclass(frozen=True)
class DomainStatus:
    domain: str
    state: BreakerState
    failures: int
    total: int
    window_start: int
    opened_at: int | None
    reopens_at: int | None
    probe_started: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "state": self.state.value,
            "failures": self.failures,
            "requests": self.total,
            "window_start": self.window_start,
            "opened_at": self.opened_at,
            "half_open_at": self.reopens_at,
        }


def domain_of(url: str) -> str | None:
    host = urlsplit(url).hostname
    return host.lower() if host else None


class Breakers(Protocol):
    """The shared breaker state (``pagefleet.adapters.dynamodb.breakers`` on AWS)."""

    policy: BreakerPolicy

    def get(self, domain: str) -> DomainStatus: ...

    def list(self) -> list[DomainStatus]: ...

    def admit(self, domain: str, *, now: int, worker: str) -> Admission: ...

    def record(
        self, domain: str, *, ok: bool, now: int, probe: bool = False, worker: str = ""
    ) -> BreakerState: ...

    def record_counts(
        self, domain: str, *, total: int, failures: int, now: int
    ) -> BreakerState: ...
