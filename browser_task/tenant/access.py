"""A job's tenant data, reached only with credentials scoped to that tenant.

On AWS the worker's own role cannot read artifacts, sessions or secrets at all. For each
job it assumes the job role (``WorkerSettings.job_role_arn``) with the session tag
``tenant=<id>``; the role's policies allow S3 only under ``<tenant>/``, DynamoDB only on
items whose partition key is the tenant's (``dynamodb:LeadingKeys``) and Secrets Manager
only under ``pagefleet/<stage>/<tenant>/``, each by ``${aws:PrincipalTag/tenant}``. So a bug
in the worker (a wrong tenant id, a crafted key) reaches nothing of another tenant: IAM
refuses it. Each tenant's stores sign with credentials that renew themselves (botocore's
``RefreshableCredentials``, re-assuming the role) while a job holds them: assuming a role
from the task role is role chaining, capped at one hour, and a job may run longer. Without
a job role (tools, some tests) every tenant's stores use the worker's own clients, as before.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import botocore.session
from botocore.config import Config
from botocore.credentials import RefreshableCredentials

from browser_task.tenant.logins import S3SessionStore, SessionStore
from pagefleet.adapters.client_config import aws_session, with_validation_setting
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.adapters.s3 import S3ArtifactStore
from pagefleet.adapters.secrets import SecretsManagerResolver
from pagefleet.jobs.ports import ArtifactStore, SecretStore
from pagefleet.specs.settings import WorkerSettings
from pagefleet.tenancy.ports import UsageStore

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

    from pagefleet.browsing.commands import CommandLedger
    from pagefleet.browsing.input_events import TakeoverInputs

TENANT_TAG = "tenant"
# What is asked of AssumeRole: role chaining (the task role assuming the job role) allows at
# most an hour. The answer's Expiration is what counts (the local stack issues minutes).
CREDENTIALS_S = 3600
# botocore renews 15 min (advisory: one thread tries, the others go on signing) and 10 min
# (mandatory: every caller waits) before expiry: on credentials of an hour that is a quarter
# and a sixth of their life. Shorter credentials (AssumeRole's minimum is 900 s) keep those
# shares, else every signed request would re-assume the role.
ADVISORY_SHARE = 1 / 4
MANDATORY_SHARE = 1 / 6
ADVISORY_MAX_S = 15 * 60
MANDATORY_MAX_S = 10 * 60
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
    # Its browser sessions' commands (steps, extracted data, snapshots): reached only as
    # the tenant, as its artifacts are (None: this worker takes no sessions). Made when
    # first needed (``SessionTables``), as is the next one.
    commands: Callable[[], CommandLedger] | None = None
    # What a person does on a taken-over page, in the same partition (None: not read).
    inputs: Callable[[], TakeoverInputs] | None = None


TenantDataSource = Callable[[str], TenantData]


class SharedTenantData:
    """The same stores for every tenant: the worker's own identity (no job role)."""

    def __init__(
        self,
        artifacts: ArtifactStore,
        secrets: SecretStore,
        sessions: SessionStore | None,
        usage: UsageStore | None,
        commands: Callable[[], CommandLedger] | None = None,
        inputs: Callable[[], TakeoverInputs] | None = None,
    ) -> None:
        self._parts = (artifacts, secrets, sessions, usage)
        self._commands = commands
        self._inputs = inputs

    def __call__(self, tenant_id: str) -> TenantData:
        return TenantData(tenant_id, *self._parts, commands=self._commands, inputs=self._inputs)


@dataclass(frozen=True)
class SessionTables:
    """Where a tenant's browser sessions' commands and takeover inputs are kept: its
    DynamoDB client and the jobs table. Their stores (and the modules they import) are made
    by the first job that reads them, a session's or a taken-over job's (a new one each
    time: they hold only the client and the table)."""

    dynamodb: Any
    table: str

    def commands(self) -> CommandLedger:
        from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger

        return DynamoCommandLedger(self.dynamodb, self.table)

    def inputs(self) -> TakeoverInputs:
        from pagefleet.adapters.dynamodb.takeover_inputs import DynamoTakeoverInputs

        return DynamoTakeoverInputs(self.dynamodb, self.table)


def session_name(tenant_id: str) -> str:
    return f"tenant-{tenant_id}"[:64]


def refresh_windows(lifetime_s: float) -> tuple[int, int]:
    """(advisory, mandatory) whole seconds before expiry that credentials of this life
    renew (at least 1 each)."""
    return (
        max(1, int(min(ADVISORY_MAX_S, lifetime_s * ADVISORY_SHARE))),
        max(1, int(min(MANDATORY_MAX_S, lifetime_s * MANDATORY_SHARE))),
    )


class RoleRefresher:
    """One tenant's job-role credentials: AssumeRole with its tag, as botocore's refresh
    metadata; each answer sets the refresh windows to its own lifetime."""

    def __init__(
        self,
        sts: Any,
        role_arn: str,
        tenant_id: str,
        clock: Callable[[], float],
        on_assumed: Callable[[], None],
    ) -> None:
        self._sts = sts
        self._role = role_arn
        self._tenant = tenant_id
        self._clock = clock
        self._on_assumed = on_assumed
        self.identity: str | None = None
        self.credentials: RefreshableCredentials | None = None

    def __call__(self) -> dict[str, str]:
        answer = self._sts.assume_role(
            RoleArn=self._role,
            RoleSessionName=session_name(self._tenant),
            Tags=[{"Key": TENANT_TAG, "Value": self._tenant}],
            DurationSeconds=CREDENTIALS_S,
        )
        self._on_assumed()
        issued = answer["Credentials"]
        expiration = issued.get("Expiration")
        expires = (
            expiration.timestamp()
            if hasattr(expiration, "timestamp")
            else self._clock() + CREDENTIALS_S
        )
        if self.credentials is not None:  # a renewal: windows for this set's life
            # The constructor's advisory/mandatory_timeout land in these attributes; botocore
            # has no setter for a renewal whose lifetime differs.
            advisory, mandatory = refresh_windows(expires - self._clock())
            self.credentials._advisory_refresh_timeout = advisory  # type: ignore[attr-defined]
            self.credentials._mandatory_refresh_timeout = mandatory  # type: ignore[attr-defined]
        self.identity = str(answer.get("AssumedRoleUser", {}).get("Arn", "")) or None
        return {
            "access_key": issued["AccessKeyId"],
            "secret_key": issued["SecretAccessKey"],
            "token": issued["SessionToken"],
            "expiry_time": datetime.fromtimestamp(expires, UTC).isoformat(),
        }

    def start(self) -> RefreshableCredentials:
        first = self()
        expires = datetime.fromisoformat(first["expiry_time"])
        advisory, mandatory = refresh_windows(expires.timestamp() - self._clock())
        self.credentials = RefreshableCredentials(
            access_key=first["access_key"],
            secret_key=first["secret_key"],
            token=first["token"],
            expiry_time=expires,
            refresh_using=self,
            method="assume-role",
            time_fetcher=lambda: datetime.fromtimestamp(self._clock(), UTC),
            advisory_timeout=advisory,
            mandatory_timeout=mandatory,
        )
        return self.credentials


class TenantAccess:
    """Per tenant, stores built on self-renewing credentials of the job role tagged with
    that tenant."""

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
        self._sts = sts or aws_session().client("sts", config=with_validation_setting(_CONFIG))
        self._clock = clock
        self._on_client = on_client
        self._lock = threading.Lock()
        self._tenant_locks: dict[str, threading.Lock] = {}
        self._cached: OrderedDict[str, TenantData] = OrderedDict()
        self.assumed = 0  # AssumeRole calls made, renewals included (tests, metrics)

    def __call__(self, tenant_id: str) -> TenantData:
        with self._lock:
            lock = self._tenant_locks.setdefault(tenant_id, threading.Lock())
        with lock:  # one first AssumeRole per tenant, however many slots ask
            with self._lock:
                hit = self._cached.get(tenant_id)
                if hit is not None:
                    self._cached.move_to_end(tenant_id)
                    return hit
            data = self._build(tenant_id)
            with self._lock:
                self._cached[tenant_id] = data
                while len(self._cached) > MAX_TENANTS:
                    self._cached.popitem(last=False)
            return data

    def _count(self) -> None:
        with self._lock:
            self.assumed += 1

    def _build(self, tenant_id: str) -> TenantData:
        refresher = RoleRefresher(self._sts, self._role, tenant_id, self._clock, self._count)
        core = botocore.session.get_session()
        # botocore has no public setter for an object that refreshes; this is how its own
        # assume-role provider's credentials reach a session's clients.
        core._credentials = refresher.start()  # type: ignore[attr-defined]
        # Its clients share the models the worker's other sessions loaded.
        session = aws_session(core)
        settings = self._settings

        def client(service: str, config: Config = _CONFIG) -> Any:
            config = with_validation_setting(config)
            made = session.client(service, config=config)  # type: ignore[call-overload]
            if self._on_client is not None:
                self._on_client(tenant_id, service, made)
            return made

        s3 = client("s3", _S3_CONFIG)
        dynamodb = client("dynamodb")
        usage = DynamoUsageStore(dynamodb, settings.usage_table) if settings.usage_table else None
        tables = SessionTables(dynamodb, settings.jobs_table)
        return TenantData(
            tenant_id=tenant_id,
            artifacts=S3ArtifactStore(s3, settings.artifacts_bucket),
            secrets=SecretsManagerResolver(client("secretsmanager"), settings.stage),
            sessions=S3SessionStore(s3, settings.artifacts_bucket, ttl_s=self._session_ttl_s),
            usage=usage,
            identity=refresher.identity,
            commands=tables.commands,
            inputs=tables.inputs,
        )


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
    tables = SessionTables(client("dynamodb"), settings.jobs_table)
    return SharedTenantData(
        artifacts,
        secrets
        or SecretsManagerResolver(cast("SecretsManagerClient", secrets_client), settings.stage),
        sessions or S3SessionStore(client("s3"), settings.artifacts_bucket, ttl_s=session_ttl_s),
        usage,
        tables.commands,
        tables.inputs,
    )
