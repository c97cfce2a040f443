"""Builders of the tenants' parts: their store, audit log, and limits, counters and usage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagefleet.adapters.dynamodb.audit import DynamoAuditLog
    from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
    from pagefleet.specs.settings import (
        CoreSettings,
    )
    from pagefleet.tenancy.service import Tenancy

from pagefleet.runtime.base import RuntimeBase


class TenantBuilders(RuntimeBase):
    def tenant_store(self, tenants_table: str) -> DynamoTenantStore:
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb import DynamoTenantStore

        return self._once(
            ("tenants", tenants_table),
            lambda: DynamoTenantStore(self.client("dynamodb"), tenants_table),
        )

    def audit_log(self, tenants_table: str) -> DynamoAuditLog:
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.audit import DynamoAuditLog

        return self._once(
            ("audit", tenants_table),
            lambda: DynamoAuditLog(self.client("dynamodb"), tenants_table),
        )

    def tenancy(self, settings: CoreSettings) -> Tenancy:
        """Tenant limits, counters, audit and usage (the lifecycle's hooks among them)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.job_store import DynamoJobStore
        from pagefleet.adapters.dynamodb.tenant_counters import (
            DynamoTenantCounters,
            DynamoUnstartedJobs,
        )
        from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
        from pagefleet.tenancy.admission import Quotas
        from pagefleet.tenancy.gate import TenantGate
        from pagefleet.tenancy.limits import LimitsCache
        from pagefleet.tenancy.service import Tenancy

        def build() -> Tenancy:
            db = self.client("dynamodb")
            policies = self.tenant_store(settings.tenants_table)
            limits = LimitsCache(
                policies, settings.tenant_defaults, ttl_s=settings.limits_cache_seconds
            )
            counters = DynamoTenantCounters(db, settings.tenants_table)
            return Tenancy(
                policies=policies,
                limits=limits,
                quotas=Quotas(counters, limits, DynamoUnstartedJobs(db, settings.jobs_table)),
                gate=TenantGate(counters, limits, DynamoJobStore(db, settings.jobs_table)),
                audit=self.audit_log(settings.tenants_table),
                usage=DynamoUsageStore(db, settings.usage_table) if settings.usage_table else None,
                pool_names=settings.pool_names,
            )

        return self._per("tenancy", settings, build)
