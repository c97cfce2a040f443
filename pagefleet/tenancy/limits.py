"""A tenant's limits: the stage's defaults, overridden by what an admin set for the tenant.

``LimitDefaults`` is part of every runtime's settings (``PAGEFLEET_TENANT_DEFAULTS``, per
stage in infra/config.py); ``TenantPolicy`` (the tenants table) holds only what an admin
changed; ``effective_limits`` merges the two into the values everything enforces.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.jobs.models import TenantPolicy
from pagefleet.specs.tenant_defaults import LimitDefaults, PoolNames
from pagefleet.specs.traces import DEFAULT_TRACE, TraceMode

DAY_S = 86_400
# A job's length as the backlog spreading assumes it (short, so a freed slot never waits
# long for the next of the tenant's jobs): see ``gate.defer_delay`` and ``start_delay``.
BACKLOG_JOB_S = 1.0
# Idempotency keys are kept this long, whatever the tenant's retention (as Stripe does).
IDEMPOTENCY_TTL_S = DAY_S

__all__ = ["LimitDefaults", "LimitsCache", "LimitsChange", "TenantLimits", "effective_limits"]


class TenantLimits(BaseModel):
    """What is enforced for one tenant (every field resolved)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    submits_per_minute: int
    burst: int
    max_queued: int
    max_running: int
    allow_evaluate: bool
    retention_days: int
    session_days: int
    trace: TraceMode = DEFAULT_TRACE
    pools: PoolNames | None = None  # None: every pool

    @property
    def retention_s(self) -> int:
        return self.retention_days * DAY_S

    @property
    def session_s(self) -> int:
        return self.session_days * DAY_S


def effective_limits(policy: TenantPolicy, defaults: LimitDefaults) -> TenantLimits:
    def pick(name: str) -> Any:
        value = getattr(policy, name)
        return getattr(defaults, name) if value is None else value

    rate = int(pick("submits_per_minute"))
    # The burst defaults to the per-minute rate: the tenant's own when an admin set its rate.
    if policy.burst is not None:
        burst = policy.burst
    elif policy.submits_per_minute is not None:
        burst = rate
    else:
        burst = defaults.burst or rate
    return TenantLimits(
        submits_per_minute=rate,
        burst=int(burst),
        max_queued=int(pick("max_queued")),
        max_running=int(pick("max_running")),
        allow_evaluate=bool(pick("allow_evaluate")),
        retention_days=int(pick("retention_days")),
        session_days=int(pick("session_days")),
        trace=pick("trace"),
        pools=pick("pools"),
    )


class LimitsChange(BaseModel):
    """What ``set-limits`` changes; a field left out keeps its value, ``reset`` names fields
    to put back to the stage default."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    submits_per_minute: int | None = Field(default=None, ge=1, le=100_000)
    burst: int | None = Field(default=None, ge=1, le=100_000)
    max_queued: int | None = Field(default=None, ge=1, le=1_000_000)
    max_running: int | None = Field(default=None, ge=1, le=200)
    allow_evaluate: bool | None = None
    retention_days: int | None = Field(default=None, ge=1, le=3650)
    session_days: int | None = Field(default=None, ge=1, le=365)
    trace: TraceMode | None = None
    pools: PoolNames | None = Field(
        default=None, min_length=1, max_length=50, description="the pools its jobs may run in"
    )
    reset: list[str] = Field(
        default_factory=list, max_length=10, description="fields back to the stage default"
    )

    @model_validator(mode="after")
    def _known_resets(self) -> LimitsChange:
        known = set(TenantPolicy.model_fields)
        unknown = [name for name in self.reset if name not in known]
        if unknown:
            raise ValueError(f"reset names unknown limits {unknown}; known: {sorted(known)}")
        return self

    def apply(self, policy: TenantPolicy) -> TenantPolicy:
        updates = self.model_dump(exclude={"reset"}, exclude_none=True)
        updates.update(dict.fromkeys(self.reset))
        return policy.model_copy(update=updates)

    def is_empty(self) -> bool:
        return not self.model_dump(exclude={"reset"}, exclude_none=True) and not self.reset


class PolicySource(Protocol):
    def get_policy(self, tenant_id: str) -> TenantPolicy: ...


class LimitsCache:
    """Effective limits per tenant, read from the tenants table at most every ``ttl_s``.

    The worker asks at every claim and the API at every submission: a limit an admin
    changes takes effect within ``ttl_s`` everywhere, without a read per job.
    """

    def __init__(
        self,
        policies: PolicySource,
        defaults: LimitDefaults,
        *,
        ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._policies = policies
        self.defaults = defaults
        self._ttl = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[float, TenantLimits]] = {}

    def __call__(self, tenant_id: str) -> TenantLimits:
        now = self._clock()
        with self._lock:
            hit = self._cached.get(tenant_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        limits = effective_limits(self._policies.get_policy(tenant_id), self.defaults)
        with self._lock:
            if len(self._cached) > 10_000:
                self._cached.clear()
            self._cached[tenant_id] = (now + self._ttl, limits)
        return limits

    def forget(self, tenant_id: str) -> None:
        with self._lock:
            self._cached.pop(tenant_id, None)

    def get_policy(self, tenant_id: str) -> TenantLimits:
        """Read now, not from the cache: the worker's executor asks this for a job with an
        evaluate step only, and a right an admin just granted or took back must hold."""
        self.forget(tenant_id)
        return self(tenant_id)
