"""Builds a process's ``Tenancy`` (limits, counters, the lifecycle's tenant gate, audit,
usage) from its settings: called once per process by ``RUNTIME.tenancy``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pagefleet.adapters.dynamodb.audit import DynamoAuditLog
from pagefleet.adapters.dynamodb.job_store import DynamoJobStore
from pagefleet.adapters.dynamodb.tenant_counters import DynamoTenantCounters, DynamoUnstartedJobs
from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.tenancy.admission import Quotas
from pagefleet.tenancy.gate import TenantGate
from pagefleet.tenancy.limits import LimitsCache
from pagefleet.tenancy.service import Tenancy

if TYPE_CHECKING:
    from pagefleet.runtime import Runtime
    from pagefleet.settings import CoreSettings


def build_tenancy(runtime: Runtime, settings: CoreSettings) -> Tenancy:
    db = runtime.client("dynamodb")
    policies = DynamoTenantStore(db, settings.tenants_table)
    limits = LimitsCache(policies, settings.tenant_defaults)
    counters = DynamoTenantCounters(db, settings.tenants_table)
    return Tenancy(
        policies=policies,
        limits=limits,
        quotas=Quotas(counters, limits, DynamoUnstartedJobs(db, settings.jobs_table)),
        gate=TenantGate(counters, limits, DynamoJobStore(db, settings.jobs_table)),
        audit=DynamoAuditLog(db, settings.tenants_table),
        usage=DynamoUsageStore(db, settings.usage_table) if settings.usage_table else None,
    )
