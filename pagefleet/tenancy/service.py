"""What the API and the CLI do with tenants: show and set limits, audit, report usage.

Every function takes the ``Tenancy`` it works with (built once per process by
``pagefleet.runtime``); nothing here reads the environment or talks to AWS on import.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pagefleet import ids
from pagefleet.errors import InvalidField, InvalidRequest, NotFound
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock, TenantStore
from pagefleet.pricing import Worker, price_table
from pagefleet.specs.traces import TraceMode
from pagefleet.tenancy.admission import Quotas
from pagefleet.tenancy.audit import AuditAction, audit_record
from pagefleet.tenancy.gate import TenantGate
from pagefleet.tenancy.limits import LimitsCache, LimitsChange
from pagefleet.tenancy.ports import AuditLog, UsageStore
from pagefleet.tenancy.usage import ALL_WORKFLOWS, UsageRow, day_range, priced, total
from pagefleet.tenancy.views import (
    AttemptUsageView,
    AuditPage,
    CurrentUsage,
    JobUsage,
    LimitsView,
    PriceSource,
    TenantsUsage,
    TenantView,
    UsageLine,
    UsageReport,
)

log = logging.getLogger("pagefleet.tenancy")


@dataclass(frozen=True)
class Tenancy:
    policies: TenantStore
    limits: LimitsCache
    quotas: Quotas
    gate: TenantGate
    audit: AuditLog
    usage: UsageStore | None
    clock: Clock = SYSTEM_CLOCK
    # The deployment's worker pools, which a tenant's ``pools`` limit must name.
    pool_names: tuple[str, ...] = ()

    def evaluate_allowed(self, tenant_id: str) -> bool:
        """Whether the tenant may run ``evaluate`` steps, read now (``LimitsCache.get_policy``,
        as the worker reads it for the run): one read, for jobs with an evaluate step only,
        so a right an admin grants or takes holds for the next submission."""
        return self.limits.get_policy(tenant_id).allow_evaluate

    def pools_allowed(self, tenant_id: str) -> frozenset[str] | None:
        """The pools the tenant's jobs may run in (cached limits; None: every pool)."""
        pools = self.limits(tenant_id).pools
        return None if pools is None else frozenset(pools)

    def trace_default(self, tenant_id: str) -> TraceMode:
        """The trace mode of the tenant's jobs that do not set one (cached limits: the
        admission has just read them for the same submission)."""
        return self.limits(tenant_id).trace


# --- limits -----------------------------------------------------------------------------------
def tenant_view(t: Tenancy, tenant_id: str) -> TenantView:
    policy = t.policies.get_policy(tenant_id)
    limits = t.limits(tenant_id)
    counters = t.quotas.view(tenant_id)
    now_ms = t.quotas.now_ms()
    bucket = t.quotas.bucket(tenant_id)
    start = max(counters.tat_ms or 0, now_ms)
    return TenantView(
        tenant_id=tenant_id,
        limits=LimitsView.of(limits),
        overrides=sorted(k for k, v in policy.model_dump().items() if v is not None),
        usage=CurrentUsage(
            running=len(counters.running),
            queued=counters.queued,
            submissions_this_minute=counters.minute_submits,
            submissions_available=bucket.available(counters.tat_ms, now_ms),
            rate_resets_in_s=math.ceil((start - now_ms) / 1000),
        ),
    )


def set_limits(t: Tenancy, tenant_id: str, change: LimitsChange, *, actor: str) -> TenantView:
    if change.is_empty():
        raise InvalidRequest("name at least one limit to change", field="body")
    unknown = [p for p in change.pools or () if t.pool_names and p not in t.pool_names]
    if unknown:
        raise InvalidField(
            f"unknown pools {unknown}; this deployment's pools: {', '.join(t.pool_names)}",
            field="pools",
        )
    before = t.policies.get_policy(tenant_id)
    after = change.apply(before)
    # Validate the result as a whole (e.g. a burst that makes no sense for the new rate).
    TenantPolicy.model_validate(after.model_dump())
    t.policies.put_policy(tenant_id, after)
    t.limits.forget(tenant_id)
    record(
        t,
        actor,
        "limits.changed",
        tenant_id=tenant_id,
        details={
            "before": before.model_dump(exclude_none=True),
            "after": after.model_dump(exclude_none=True),
        },
    )
    return tenant_view(t, tenant_id)


# --- audit ------------------------------------------------------------------------------------
def record(
    t: Tenancy | AuditLog,
    actor: str,
    action: AuditAction,
    *,
    tenant_id: str | None = None,
    target: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Leave an audit record. Written after the act: a failure is logged, the act stands."""
    audit = t.audit if isinstance(t, Tenancy) else t
    entry = audit_record(actor, action, tenant_id=tenant_id, target=target, details=details)
    try:
        audit.write(entry)
    except Exception:
        log.exception("audit record not written", extra={"audit": entry.model_dump()})


def audit_page(t: Tenancy, *, limit: int, before: str | None) -> AuditPage:
    """``before``: the last audit id of the previous page. Any well-formed id is a position
    in time order (the record it named may have expired since), one that is not is refused."""
    if before is not None and ids.ulid_time(before) is None:
        raise InvalidField("before: not an audit id (a ULID)", field="before")
    records = t.audit.recent(limit=limit, before=before)
    more = records[-1].audit_id if len(records) == limit else None
    return AuditPage(records=records, next_before=more)


# --- usage ------------------------------------------------------------------------------------
def _usage_store(t: Tenancy) -> UsageStore:
    if t.usage is None:
        raise NotFound("usage is not recorded in this deployment (no usage table)")
    return t.usage


def _prices() -> PriceSource:
    table = price_table()
    return PriceSource(as_of=table["as_of"], source=table["source"], currency=table["currency"])


def _period(first: str | None, last: str | None, now: float) -> tuple[str, str]:
    today = datetime.fromtimestamp(now, UTC).date().isoformat()
    last = last or today
    first = first or last[:8] + "01"  # the month so far by default
    try:
        day_range(first, last)
    except ValueError as exc:
        raise InvalidRequest(f"from/to: {exc}", field="from") from None
    return first, last


def usage_report(
    t: Tenancy,
    tenant_id: str,
    *,
    first: str | None,
    last: str | None,
    worker: Worker,
) -> UsageReport:
    first, last = _period(first, last, t.clock.now())
    rows = _usage_store(t).days(tenant_id, first, last)
    keep = t.limits(tenant_id).retention_days

    def line(row: UsageRow, **labels: str | None) -> UsageLine:
        return UsageLine.of(row, priced(row, worker, keep), **labels)

    days = [r for r in rows if r.workflow == ALL_WORKFLOWS]
    by_workflow: dict[str, UsageRow] = {}
    for row in rows:
        if row.workflow != ALL_WORKFLOWS:
            base = by_workflow.get(row.workflow) or UsageRow(
                tenant_id=tenant_id, day=first, workflow=row.workflow
            )
            by_workflow[row.workflow] = base.add(row)
    return UsageReport(
        tenant_id=tenant_id,
        first_day=first,
        last_day=last,
        total=line(total(days, tenant_id, first)),
        days=[line(r, day=r.day) for r in days],
        workflows=[line(r, workflow=name) for name, r in sorted(by_workflow.items())],
        prices=_prices(),
    )


def job_usage(t: Tenancy, tenant_id: str, job_id: str, *, worker: Worker) -> JobUsage:
    attempts = _usage_store(t).attempts(tenant_id, job_id)
    summed = UsageRow(tenant_id=tenant_id, day="")
    for attempt in attempts:
        summed = summed.add(attempt)
    keep = t.limits(tenant_id).retention_days
    return JobUsage(
        job_id=job_id,
        attempts=[AttemptUsageView.model_validate(a.model_dump()) for a in attempts],
        total=UsageLine.of(summed, priced(summed, worker, keep)),
        prices=_prices(),
    )


def every_tenant_usage(
    t: Tenancy, *, first: str | None, last: str | None, worker: Worker
) -> TenantsUsage:
    first, last = _period(first, last, t.clock.now())
    store = _usage_store(t)
    by_tenant: dict[str, UsageRow] = {}
    for day in day_range(first, last):
        for row in store.every_tenant(day):
            base = by_tenant.get(row.tenant_id) or UsageRow(tenant_id=row.tenant_id, day=first)
            by_tenant[row.tenant_id] = base.add(row)
    keep = t.limits.defaults.retention_days
    lines = [
        UsageLine.of(r, priced(r, worker, keep), tenant_id=name)
        for name, r in sorted(by_tenant.items())
    ]
    summed = total(list(by_tenant.values()), "*", first)
    return TenantsUsage(
        first_day=first,
        last_day=last,
        tenants=lines,
        total=UsageLine.of(summed, priced(summed, worker, keep)),
        prices=_prices(),
    )
