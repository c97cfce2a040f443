"""Builds a process's ``Tenancy`` (limits, counters, the lifecycle's tenant gate, audit,
usage) and its jobs-stream consumer from its settings and AWS clients: called once per
process through ``RUNTIME.tenancy`` and ``RUNTIME.change_consumers``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pagefleet.adapters.dynamodb.audit import DynamoAuditLog
from pagefleet.adapters.dynamodb.job_store import DynamoJobStore
from pagefleet.adapters.dynamodb.tenant_counters import DynamoTenantCounters, DynamoUnstartedJobs
from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.adapters.job_data import AwsJobData
from pagefleet.tenancy.admission import Quotas
from pagefleet.tenancy.gate import TenantGate
from pagefleet.tenancy.limits import LimitsCache
from pagefleet.tenancy.retention import RetentionConsumer
from pagefleet.tenancy.service import Tenancy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

    from pagefleet.specs.settings import CoreSettings


def build_tenancy(db: DynamoDBClient, settings: CoreSettings) -> Tenancy:
    policies = DynamoTenantStore(db, settings.tenants_table)
    limits = LimitsCache(policies, settings.tenant_defaults, ttl_s=settings.limits_cache_seconds)
    counters = DynamoTenantCounters(db, settings.tenants_table)
    return Tenancy(
        policies=policies,
        limits=limits,
        quotas=Quotas(counters, limits, DynamoUnstartedJobs(db, settings.jobs_table)),
        gate=TenantGate(counters, limits, DynamoJobStore(db, settings.jobs_table)),
        audit=DynamoAuditLog(db, settings.tenants_table),
        usage=DynamoUsageStore(db, settings.usage_table) if settings.usage_table else None,
    )


def job_data(db: DynamoDBClient, s3: S3Client, settings: CoreSettings) -> AwsJobData:
    return AwsJobData(db, settings.jobs_table, s3, settings.artifacts_bucket)


def retention_consumer(
    db: DynamoDBClient, s3: S3Client, settings: CoreSettings, tenancy: Tenancy
) -> RetentionConsumer:
    return RetentionConsumer(job_data(db, s3, settings), tenancy.limits)
