"""What makes a job a browser session (pagefleet.browsing): kept in its request."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_IDLE_S = 300
MAX_IDLE_S = 1800
DEFAULT_MAX_DURATION_S = 1800
MAX_DURATION_S = 3600  # a job's job_timeout_s at most
# A session's (and a job's) spend cap, at most: an hour of a browser costs cents.
MAX_COST_USD = 100.0


class SessionTerms(BaseModel):
    """What makes a job a session (kept in its request; never given by a job's client)."""

    # Ignored fields: a session recorded before 2026-12-05 names its queues (``channel``);
    # its worker is now its lease owner (pagefleet.browsing.inbox).
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    idle_timeout_s: int = Field(default=DEFAULT_IDLE_S, ge=5, le=MAX_IDLE_S)
    max_duration_s: int = Field(default=DEFAULT_MAX_DURATION_S, ge=10, le=MAX_DURATION_S)
    max_cost_usd: float | None = Field(default=None, gt=0, le=MAX_COST_USD)
    # The browser-seconds the cap buys, worked out at open on the stage's pricing (the
    # worker ends the session there: error.kind cost_cap_reached).
    cost_cap_s: float | None = Field(default=None, ge=0)
