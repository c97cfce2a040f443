"""The tenancy routes' response bodies (the API, the OpenAPI document and the client share
them, as they share ``pagefleet.api``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pagefleet.specs.traces import DEFAULT_TRACE, TraceMode
from pagefleet.tenancy.audit import AuditRecord
from pagefleet.tenancy.limits import TenantLimits
from pagefleet.tenancy.usage import UsageRow
from pagefleet.view import View


class LimitsView(View):
    submits_per_minute: int
    burst: int = Field(description="submissions allowed at once before the rate applies")
    max_queued: int = Field(description="jobs waiting to start, at most")
    max_running: int = Field(description="jobs running at once, at most")
    allow_evaluate: bool
    retention_days: int = Field(description="days jobs, events and usage markers are kept")
    session_days: int = Field(description="days a saved login session stays usable")
    trace: TraceMode = Field(
        default=DEFAULT_TRACE, description="when jobs that do not set options.trace record one"
    )
    pools: list[str] | None = Field(
        default=None, description="the worker pools its jobs may run in (null: every pool)"
    )

    @classmethod
    def of(cls, limits: TenantLimits) -> LimitsView:
        return cls.model_validate(limits.model_dump())


class CurrentUsage(View):
    running: int
    queued: int = Field(description="submitted and not started yet")
    submissions_this_minute: int
    submissions_available: int = Field(description="submissions the rate allows right now")
    rate_resets_in_s: int = Field(description="seconds until the full burst is available")


class TenantView(View):
    """A tenant's limits (and which of them an admin set) and what it uses right now."""

    tenant_id: str
    limits: LimitsView
    overrides: list[str] = Field(
        default_factory=list, description="limits set for this tenant (the rest: stage defaults)"
    )
    usage: CurrentUsage


class RegionCost(View):
    region: str
    total_usd: float
    by_service_usd: dict[str, float]
    prices_as_of: str


class UsageLine(View):
    """Usage summed over a day, a workflow or a period, with its estimated cost."""

    day: str | None = None
    workflow: str | None = None
    tenant_id: str | None = None
    jobs: int = 0
    attempts: int = 0
    browser_seconds: float = 0.0
    page_requests: int = 0
    artifact_bytes: int = 0
    artifact_puts: int = 0
    cost: dict[str, RegionCost] = Field(
        default_factory=dict, description="by region: us-east-1 and ap-south-1"
    )

    @classmethod
    def of(cls, row: UsageRow, cost: dict[str, Any], **labels: str | None) -> UsageLine:
        counts = row.model_dump(exclude={"tenant_id", "day", "workflow"})
        return cls.model_validate({**counts, **labels, "cost": cost})


class PriceSource(View):
    as_of: str
    source: str
    currency: str


class UsageReport(View):
    tenant_id: str
    first_day: str
    last_day: str
    total: UsageLine
    days: list[UsageLine]
    workflows: list[UsageLine]
    prices: PriceSource


class AttemptUsageView(View):
    attempt: int
    day: str
    browser_seconds: float
    page_requests: int
    artifact_bytes: int
    artifact_puts: int
    status: str | None = None
    ended_at: str | None = None


class JobUsage(View):
    job_id: str
    attempts: list[AttemptUsageView]
    total: UsageLine
    prices: PriceSource


class TenantsUsage(View):
    """Every tenant's usage over a period (admin view)."""

    first_day: str
    last_day: str
    tenants: list[UsageLine]
    total: UsageLine
    prices: PriceSource


class AuditPage(View):
    records: list[AuditRecord]
    next_before: str | None = Field(
        default=None, description="pass as ?before= to read older records"
    )


class SessionInfoView(View):
    name: str
    saved_at: str | None = None
    expires_at: str | None = None
    expired: bool = False
    size: int = 0


class SessionList(View):
    sessions: list[SessionInfoView]


class Deleted(View):
    """``DELETE /v1/jobs/{id}``: ``deleted`` (record, events and artifacts gone) or
    ``deleting`` (the job was running: cancelled, and deleted once it has stopped)."""

    job_id: str
    status: str = Field(description="deleted | deleting")
    artifacts_deleted: int = 0
    items_deleted: int = 0
