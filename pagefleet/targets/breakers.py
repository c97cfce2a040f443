"""Circuit breakers per target origin, shared by every worker through DynamoDB.

closed --(failure rate over the window)--> open --(cooldown)--> half_open (one probe job)
half_open --probe succeeds--> closed;  half_open --probe fails--> open again.

A breaker is kept per origin (scheme, host, port), so a closed port on a host says nothing
about the site on its other ports, and a job's failure is charged to the origin that failed
(not to its first goto's). Each origin has two: the tenant's own, which opens on that
tenant's failures alone, and the shared one, which opens only when at least ``min_tenants``
tenants fail there in the same window. One tenant's failing jobs therefore hold back only
that tenant, and a site that fails for everyone is held back for everyone.

A few tenants together can still open a shared breaker (two cheap tenants are enough for
``min_tenants``). So a tenant that succeeded at the origin within ``trusted_for_s`` and
whose own breaker there is closed is judged by its own breaker alone: the shared one holds
back tenants with no recent success of their own there (new ones, or ones failing too).
Such a tenant's own breaker still opens on its own failures, so a site that really went
down stops it after a window's worth of failures at most.

While a breaker is open its jobs are deferred (their message is re-sent with a delay and
the job stays queued with a reason), never failed.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

SHARED = "shared"
TENANT = "tenant"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class BreakerPolicy(BaseModel):
    model_config = ConfigDict(defer_build=True)
    window_s: int = Field(default=60, ge=1)
    min_requests: int = Field(default=5, ge=1)
    failure_rate: float = Field(default=0.5, gt=0, le=1)
    cooldown_s: int = Field(default=30, ge=1)
    # A probe not heard from for this long is replaced: its worker keeps it alive every few
    # seconds while it runs (``keep_probe``), so a silent probe's worker died. It was 300 s
    # before probes were kept alive: a site that came back stayed closed to every job that long.
    probe_timeout_s: int = Field(default=30, ge=1)
    # Tenants that must see failures in one window before the shared breaker opens.
    min_tenants: int = Field(default=2, ge=1)
    # A tenant that succeeded at an origin this recently is not held back by its shared
    # breaker, only by its own (0: the shared breaker holds back everyone).
    trusted_for_s: int = Field(default=3600, ge=0)


@dataclass(frozen=True)
class Admission:
    allowed: bool
    probe: bool = False
    retry_after_s: int = 0
    state: BreakerState = BreakerState.CLOSED
    # Which breakers this job is the half-open probe of (SHARED, TENANT).
    probes: frozenset[str] = frozenset()
    scope: str = SHARED  # the breaker that refused


@dataclass(frozen=True)
class DomainStatus:
    """One breaker: an origin's shared one (``tenant`` None) or a tenant's own."""

    domain: str  # the origin, e.g. https://shop.example:443
    state: BreakerState
    failures: int
    total: int
    window_start: int
    opened_at: int | None
    reopens_at: int | None
    probe_started: int = 0
    failing_tenants: int = 0
    tenant: str | None = None
    last_ok_at: int | None = None  # a tenant's own breaker: its latest success there

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


_RANK = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


def worst(states: list[BreakerState]) -> BreakerState:
    """The most restrictive of some breakers' states (closed when there are none)."""
    return max(states, key=_RANK.__getitem__, default=BreakerState.CLOSED)


def trusted(own: DomainStatus, policy: BreakerPolicy, now: int) -> bool:
    """Whether a tenant's own breaker lets it past the origin's open shared breaker."""
    return (
        own.state is BreakerState.CLOSED
        and own.last_ok_at is not None
        and now - own.last_ok_at <= policy.trusted_for_s
    )


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL (default ports spelled out), else None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    shown = f"[{host}]" if ":" in host else host.lower()
    return f"{scheme}://{shown}:{port or _DEFAULT_PORTS[scheme]}"


def split_origin(origin: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an origin made by ``origin_of``."""
    scheme, _, rest = origin.partition("://")
    host, _, port = rest.rpartition(":")
    return scheme, host, int(port)


class Breakers(Protocol):
    """The breakers' shared state (``pagefleet.adapters.dynamodb.breakers`` on AWS)."""

    policy: BreakerPolicy

    def get(self, origin: str, tenant: str | None = None) -> DomainStatus: ...

    def on_host(self, host: str, tenant: str | None = None) -> builtins.list[DomainStatus]: ...

    def list(self) -> list[DomainStatus]: ...

    def admit(self, origin: str, *, tenant: str, now: int, worker: str) -> Admission: ...

    def record(
        self,
        origin: str,
        *,
        tenant: str,
        ok: bool,
        now: int,
        probes: frozenset[str] = frozenset(),
        worker: str = "",
    ) -> BreakerState: ...

    def record_counts(
        self, origin: str, *, tenant: str, total: int, failures: int, now: int
    ) -> BreakerState: ...

    def keep_probe(
        self, origin: str, *, tenant: str, probes: frozenset[str], now: int, worker: str
    ) -> None:
        """The probe ``worker`` holds is still running: heard from at ``now``."""
        ...
