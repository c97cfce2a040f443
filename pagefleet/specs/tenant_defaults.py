"""The stage's default tenant limits: part of every runtime's settings, so kept free of
anything but pydantic (infra/ reads the settings models)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from pagefleet.specs.pools import POOL_NAME_PATTERN
from pagefleet.specs.traces import DEFAULT_TRACE, TraceMode

PoolName = Annotated[str, StringConstraints(pattern=POOL_NAME_PATTERN)]
# The pools a tenant's jobs may run in (None: every pool of the deployment).
PoolNames = tuple[PoolName, ...]


class LimitDefaults(BaseModel):
    """The limits of a tenant nobody set limits for (one set per stage)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    submits_per_minute: int = Field(default=120, ge=1, le=100_000)
    # None: as many as a minute's rate.
    burst: int | None = Field(default=None, ge=1, le=100_000)
    max_queued: int = Field(default=1000, ge=1, le=1_000_000)
    max_running: int = Field(default=10, ge=1, le=200)
    allow_evaluate: bool = False
    retention_days: int = Field(default=30, ge=1, le=3650)
    session_days: int = Field(default=30, ge=1, le=365)
    # When a job that does not say records a trace (pagefleet.specs.traces).
    trace: TraceMode = DEFAULT_TRACE
    # The worker pools a tenant's jobs may run in; None: every pool of the deployment.
    pools: PoolNames | None = Field(default=None, min_length=1, max_length=50)
