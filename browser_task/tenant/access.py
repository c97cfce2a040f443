"""A job's tenant data, reached only with credentials scoped to that tenant.

On AWS the worker's own role cannot read artifacts, sessions or secrets at all. For each
job it assumes the job role (``WorkerSettings.job_role_arn``) with the session tag
``tenant=<id>``; the role's policies allow S3 only under ``<tenant>/``, DynamoDB only on
items whose partition key is the tenant's (``dynamodb:LeadingKeys``) and Secrets Manager
only under ``pagefleet/<stage>/<tenant>/``, each by ``${aws:PrincipalTag/tenant}``. So a bug
in the worker (a wrong tenant id, a crafted key) reaches nothing of another tenant: IAM
refuses it. Credentials are kept per tenant for their lifetime and renewed before they
expire. Without a job role (tools, some tests) every tenant's stores use the worker's own
clients, as before.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config

from browser_task.tenant.logins import S3SessionStore, SessionStore
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.adapters.s3 import S3ArtifactStore
from pagefleet.adapters.secrets import SecretsManagerResolver
from pagefleet.jobs.ports import ArtifactStore, SecretStore
from pagefleet.specs.settings import WorkerSettings
from pagefleet.tenancy.ports import UsageStore

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

TENANT_TAG = "tenant"
# Assumed-role credentials last an hour; a new set is taken this long before they expire.
CREDENTIALS_S = 3600
RENEW_BEFORE_S = 300
# Tenants whose credentials are kept at once (least recently used ones are dropped).
MAX_TENANTS = 256
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=16)
_S3_CONFIG = _CONFIG.merge(Config(signature_version="s3v4"))


@dataclass(frozen=True)
class TenantData:
    """Where one tenant's job data is read and written."""

    tenant_id: str
    artifacts: ArtifactStore
    secrets: SecretStore
    sessions: SessionStore | None
    usage: UsageStore | None
    # The identity these stores act as (an assumed-role ARN), for logs and tests.
    identity: str | None = None


TenantDataSource = Callable[[str], TenantData]


class SharedTenantData:
    """The same stores for every tenant: the worker's own identity (no job role)."""

    def __init__(
        self,
        artifacts: ArtifactStore,
        secrets: SecretStore,
        sessions: SessionStore | None,
        usage: UsageStore | None,
    ) -> None:
        self._parts = (artifacts, secrets, sessions, usage)

    def __call__(self, tenant_id: str) -> TenantData:
        return TenantData(tenant_id, *self._parts)


def session_name(tenant_id: str) -> str:
    return f"tenant-{tenant_id}"[:64]


class TenantAccess:
    """Per tenant, stores built on credentials of the job role tagged with that tenant."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        session_ttl_s: Callable[[str], int],
        sts: Any = None,
        clock: Callable[[], float] = time.time,
        on_client: Callable[[str, str, Any], None] | None = None,
    ) -> None:
        """``on_client(tenant, service, client)`` sees every client made (tests watch them)."""
        if not settings.job_role_arn:
            raise ValueError("TenantAccess needs WorkerSettings.job_role_arn")
        self._settings = settings
        self._role = settings.job_role_arn
        self._session_ttl_s = session_ttl_s
        self._sts = sts or boto3.session.Session().client("sts", config=_CONFIG)
        self._clock = clock
        self._on_client = on_client
        self._lock = threading.Lock()
        self._tenant_locks: dict[str, threading.Lock] = {}
        self._cached: OrderedDict[str, tuple[float, TenantData]] = OrderedDict()
        self.assumed = 0  # AssumeRole calls made (tests, metrics)

    def __call__(self, tenant_id: str) -> TenantData:
        with self._lock:
            lock = self._tenant_locks.setdefault(tenant_id, threading.Lock())
        with lock:  # one AssumeRole per tenant at a time, however many slots ask
            hit = self._fresh(tenant_id)
            if hit is not None:
                return hit
            expires, data = self._assume(tenant_id)
            with self._lock:
                self._cached[tenant_id] = (expires, data)
                self._cached.move_to_end(tenant_id)
                while len(self._cached) > MAX_TENANTS:
                    self._cached.popitem(last=False)
            return data

    def _fresh(self, tenant_id: str) -> TenantData | None:
        with self._lock:
            hit = self._cached.get(tenant_id)
            if hit is None or hit[0] - RENEW_BEFORE_S <= self._clock():
                return None
            self._cached.move_to_end(tenant_id)
            return hit[1]

    def _assume(self, tenant_id: str) -> tuple[float, TenantData]:
        answer = self._sts.assume_role(
            RoleArn=self._role,
            RoleSessionName=session_name(tenant_id),
            Tags=[{"Key": TENANT_TAG, "Value": tenant_id}],
            DurationSeconds=CREDENTIALS_S,
        )
        self.assumed += 1
        credentials = answer["Credentials"]
        session = boto3.session.Session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
        expiration = credentials.get("Expiration")
        expires = (
            expiration.timestamp()
            if hasattr(expiration, "timestamp")
            else self._clock() + CREDENTIALS_S
        )
        settings = self._settings

        def client(service: str, config: Config = _CONFIG) -> Any:
            made = session.client(service, config=config)  # type: ignore[call-overload]
            if self._on_client is not None:
                self._on_client(tenant_id, service, made)
            return made

        s3 = client("s3", _S3_CONFIG)
        usage = (
            DynamoUsageStore(client("dynamodb"), settings.usage_table)
            if settings.usage_table
            else None
        )
        data = TenantData(
            tenant_id=tenant_id,
            artifacts=S3ArtifactStore(s3, settings.artifacts_bucket),
            secrets=SecretsManagerResolver(client("secretsmanager"), settings.stage),
            sessions=S3SessionStore(s3, settings.artifacts_bucket, ttl_s=self._session_ttl_s),
            usage=usage,
            identity=str(answer.get("AssumedRoleUser", {}).get("Arn", "")) or None,
        )
        return expires, data


class ClientOnFirstUse:
    """A boto3 client made when first called: most workers never read a secret, and a
    client costs ~5 MB of service model."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make

    def __getattr__(self, name: str) -> Any:
        return getattr(self._make(), name)


def tenant_data_source(
    settings: WorkerSettings,
    *,
    artifacts: ArtifactStore,
    session_ttl_s: Callable[[str], int],
    client: Callable[[str], Any],
    secrets: SecretStore | None = None,
    sessions: SessionStore | None = None,
) -> TenantDataSource:
    """The job role's tenant-scoped stores when the worker has one; else (or when a test
    hands in its own secrets or sessions) the worker's own, shared by every tenant, on the
    worker's own clients (``client(service)``, one per service for the process)."""
    if settings.job_role_arn and secrets is None and sessions is None:
        return TenantAccess(settings, session_ttl_s=session_ttl_s)
    usage = (
        DynamoUsageStore(client("dynamodb"), settings.usage_table) if settings.usage_table else None
    )
    secrets_client = ClientOnFirstUse(lambda: client("secretsmanager"))
    return SharedTenantData(
        artifacts,
        secrets
        or SecretsManagerResolver(cast("SecretsManagerClient", secrets_client), settings.stage),
        sessions or S3SessionStore(client("s3"), settings.artifacts_bucket, ttl_s=session_ttl_s),
        usage,
    )
