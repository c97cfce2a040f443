"""A target site's circuit breakers, as a tenant (and an admin) sees them."""

from __future__ import annotations

from pydantic import Field

from pagefleet.targets.breakers import BreakerState, DomainStatus
from pagefleet.view import View


class OriginView(View):
    """The circuit breakers of one origin (scheme, host, port). A tenant sees the shared
    breaker's state and next probe time, and its own breaker's; counts are for admins."""

    origin: str
    state: BreakerState = Field(description="the shared breaker (opens when several tenants fail)")
    next_probe_at: int | None = Field(
        default=None, description="epoch seconds when a probe job may run again (not closed)"
    )
    tenant_state: BreakerState = Field(
        default=BreakerState.CLOSED, description="the caller's own breaker on this origin"
    )
    tenant_next_probe_at: int | None = None
    # Admin key only.
    failures: int | None = None
    requests: int | None = None
    failing_tenants: int | None = None
    window_start: int | None = None
    opened_at: int | None = None

    @classmethod
    def of(
        cls, shared: DomainStatus, own: DomainStatus | None = None, *, detail: bool = False
    ) -> OriginView:
        view = cls(
            origin=shared.domain,
            state=shared.state,
            next_probe_at=shared.reopens_at,
            tenant_state=own.state if own else BreakerState.CLOSED,
            tenant_next_probe_at=own.reopens_at if own else None,
        )
        if detail:
            view = view.model_copy(
                update={
                    "failures": shared.failures,
                    "requests": shared.total,
                    "failing_tenants": shared.failing_tenants,
                    "window_start": shared.window_start,
                    "opened_at": shared.opened_at,
                }
            )
        return view


_RANK = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class DomainView(View):
    """The circuit breakers of a target site's origins (``state``: the worst of them)."""

    domain: str
    state: BreakerState
    next_probe_at: int | None = None
    origins: list[OriginView] = Field(default_factory=list)

    @classmethod
    def of(cls, domain: str, origins: list[OriginView]) -> DomainView:
        worst = max(origins, key=lambda o: _RANK[o.state], default=None)
        return cls(
            domain=domain,
            state=worst.state if worst else BreakerState.CLOSED,
            next_probe_at=worst.next_probe_at if worst else None,
            origins=origins,
        )


class DomainList(View):
    domains: list[DomainView]
