"""Build the AWS clients and services from settings, at start (never at import)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config

from pagefleet.adapters.dynamodb import CursorCodec, DynamoJobStore, DynamoTenantStore
from pagefleet.adapters.s3 import S3ArtifactStore
from pagefleet.adapters.sqs import SqsJobQueue
from pagefleet.breaker import DomainBreakers
from pagefleet.faults import FaultInjector
from pagefleet.jobs.service import JobServices
from pagefleet.settings import CoreSettings

# Standard retry mode backs off on throttling; adaptive would also rate-limit the client.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32)


_faults: FaultInjector | None = None


@lru_cache(maxsize=16)
def client(service: str) -> Any:
    """One boto3 client per service per process (clients are thread-safe).

    ``AWS_ENDPOINT_URL`` (set by the local stack) points every client at moto, so no code
    path differs between the local stack and AWS.
    """
    made = boto3.session.Session().client(service, config=_CONFIG)  # type: ignore[call-overload]
    if _faults is not None:
        _faults.attach(made)
    return made


def inject_faults(rate: float) -> FaultInjector | None:
    """Chaos testing only: fail ``rate`` of this process's AWS calls the way AWS does."""
    global _faults
    if rate <= 0:
        return None
    _faults = FaultInjector(rate=rate)
    client.cache_clear()  # clients made from now on carry the injector
    return _faults


def job_services(settings: CoreSettings) -> JobServices:
    if settings.aws_fault_rate > 0 and _faults is None:
        inject_faults(settings.aws_fault_rate)
    return JobServices(
        store=DynamoJobStore(client("dynamodb"), settings.jobs_table),
        queue=SqsJobQueue(client("sqs"), settings.queue_urls),
        artifacts=S3ArtifactStore(client("s3"), settings.artifacts_bucket),
        cursors=CursorCodec(),
    )


def domain_breakers(settings: CoreSettings) -> DomainBreakers:
    return DomainBreakers(client("dynamodb"), settings.jobs_table, settings.breaker)


def tenant_store(tenants_table: str) -> DynamoTenantStore:
    return DynamoTenantStore(client("dynamodb"), tenants_table)
