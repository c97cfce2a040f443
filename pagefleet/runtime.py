"""The one place a process builds its settings, AWS clients, adapters and services.

The composition roots (each Lambda handler module and the API's ``functions.api.context``,
the worker's ``browser_task.__main__``, the CLI's ``pagefleet.cli.common``, the local
stack) ask ``RUNTIME`` for what they need and hand it on; nothing below them reaches for it
(an import-linter contract). It builds each thing once, on first use (never at import), and
keeps it for the life of the process, as a Lambda execution environment keeps its globals
warm. Tests and the local stack call ``RUNTIME.reset()`` to forget everything built against
another endpoint or environment.

``AWS_ENDPOINT_URL`` (set by the local stack) points every client at the embedded AWS, so
no code path differs between the local stack and AWS.

Each builder imports its adapters and services when it is first called: a function's cold
start imports only what its first request builds (all of them at import would add ~0.35 s of
CPU to every cold start, measured with ``.pyc``; bench/latency.py, docs/performance.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import boto3
from botocore.config import Config

from pagefleet.adapters.faults import FaultInjector

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient
    from pydantic_settings import BaseSettings

    from pagefleet.adapters.dynamodb.audit import DynamoAuditLog
    from pagefleet.adapters.dynamodb.connections import DynamoConnections
    from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults
    from pagefleet.adapters.dynamodb.events import DynamoEventStore
    from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
    from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
    from pagefleet.adapters.job_data import AwsJobData
    from pagefleet.adapters.notify import SecretsManagerSigningSecrets, SqsWebhookQueue
    from pagefleet.adapters.session_channel import SqsSessionChannel
    from pagefleet.browsing.service import Sessions
    from pagefleet.jobs.changes import ChangeConsumer
    from pagefleet.jobs.models import JobRecord
    from pagefleet.jobs.service import JobServices
    from pagefleet.live.service import LiveServices
    from pagefleet.notify.sender import WebhookSender
    from pagefleet.schedules.service import SchedulerMirror, ScheduleStore
    from pagefleet.specs.settings import (
        ApiSettings,
        CoreSettings,
        LiveSettings,
        WebhookSettings,
    )
    from pagefleet.targets.breakers import Breakers
    from pagefleet.tenancy.service import Tenancy
    from pagefleet.tenancy.sessions import SessionArchive

# Standard retry mode backs off on throttling; adaptive would also rate-limit the client.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32)
# S3 presigned URLs must be SigV4: regions opened since 2014 (ap-south-1 among them) refuse
# botocore's legacy default for S3.
_S3_CONFIG = _CONFIG.merge(Config(signature_version="s3v4"))
# On AWS they also name the bucket's regional host (<bucket>.s3.<region>.amazonaws.com): the
# global one answers a bucket outside us-east-1 with a 307 to it for hours after the
# bucket's creation, and a redirected presigned URL fails its signature. Only without an
# endpoint override: on the embedded AWS, botocore's path style on that endpoint stays.
_S3_REGIONAL_CONFIG = _S3_CONFIG.merge(
    Config(s3={"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"})
)
# WebSocket posts wait on a socket far away: a short timeout, standard retries.
_MANAGEMENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=3,
    read_timeout=5,
    max_pool_connections=32,
)

# A string bound: pydantic_settings is imported with the first settings class, not here.
S = TypeVar("S", bound="BaseSettings")
T = TypeVar("T")


@dataclass(frozen=True)
class LiveApi:
    """What the API's live and notification routes use."""

    events: DynamoEventStore
    deliveries: DynamoDeliveries
    defaults: DynamoNotifyDefaults
    secrets: SecretsManagerSigningSecrets
    connections: DynamoConnections | None
    live_url: str | None
    allow_loopback: bool


class Runtime:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._built: dict[Any, Any] = {}
        self._faults: FaultInjector | None = None
        self._session: boto3.session.Session | None = None

    def reset(self) -> None:
        """Forget every client, adapter and settings object built so far."""
        with self._lock:
            self._built.clear()
            self._faults = None
            self._session = None

    def _once(self, key: Any, build: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._built:
                self._built[key] = build()
            return self._built[key]

    def _per(self, name: str, settings: BaseSettings, build: Callable[[], T]) -> T:
        """Built once per process for these settings."""
        return self._once((name, settings.model_dump_json()), build)

    # --- settings and clients -------------------------------------------------------------
    def settings(self, cls: type[S]) -> S:
        """The runtime's settings, read from the environment and validated once."""
        return self._once(("settings", cls), cls)

    @overload
    def client(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    @overload
    def client(self, service: Literal["s3"]) -> S3Client: ...
    @overload
    def client(self, service: Literal["secretsmanager"]) -> SecretsManagerClient: ...
    @overload
    def client(self, service: str) -> Any: ...

    def client(self, service: str) -> Any:
        """One boto3 client per service per process (clients are thread-safe).

        All made from one session (built under the lock, as sessions are not thread-safe):
        a session per client would load botocore's endpoint and partition data once per
        client, ~5 MB each.
        """

        def build() -> Any:
            config = _CONFIG
            if service == "s3":
                overridden = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
                    "AWS_ENDPOINT_URL"
                )
                config = _S3_CONFIG if overridden else _S3_REGIONAL_CONFIG
            if self._session is None:
                self._session = boto3.session.Session()
            made = self._session.client(service, config=config)  # type: ignore[call-overload]
            if self._faults is not None:
                self._faults.attach(made)
            return made

        return self._once(("client", service), build)

    def management_client(self, endpoint: str) -> Any:
        """The ``@connections`` client of a WebSocket stage (its callback URL)."""
        return self._once(
            ("management", endpoint),
            lambda: boto3.session.Session().client(
                "apigatewaymanagementapi", endpoint_url=endpoint, config=_MANAGEMENT_CONFIG
            ),
        )

    def inject_faults(self, rate: float) -> FaultInjector | None:
        """Chaos testing only: fail ``rate`` of this process's AWS calls the way AWS does."""
        if rate <= 0:
            return None
        with self._lock:
            self._faults = FaultInjector(rate=rate)
            # Clients (and what holds them) made from now on carry the injector.
            for key in [k for k in self._built if k[0] != "settings"]:
                del self._built[key]
            return self._faults

    # --- jobs -----------------------------------------------------------------------------
    def job_services(self, settings: CoreSettings) -> JobServices:
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb import CursorCodec, DynamoJobStore
        from pagefleet.adapters.dynamodb.workflows import DynamoWorkflowStore
        from pagefleet.adapters.s3 import S3ArtifactStore
        from pagefleet.adapters.sqs import SqsJobQueue
        from pagefleet.jobs.service import JobServices

        if settings.aws_fault_rate > 0 and self._faults is None:
            self.inject_faults(settings.aws_fault_rate)

        def build() -> JobServices:
            db = self.client("dynamodb")
            return JobServices.of(
                DynamoJobStore(db, settings.jobs_table),
                SqsJobQueue(self.client("sqs"), settings.queue_urls),
                S3ArtifactStore(self.client("s3"), settings.artifacts_bucket),
                CursorCodec(),
                workflows=DynamoWorkflowStore(db, settings.jobs_table),
                hooks=self.tenancy(settings).gate,
            )

        return self._per("jobs", settings, build)

    def session_channel(self, settings: CoreSettings) -> SqsSessionChannel:
        """Browser sessions' command and answer queues (the API and the workers)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.session_channel import SqsSessionChannel
        from pagefleet.specs.resources import session_queue_prefix

        def build() -> SqsSessionChannel:
            return SqsSessionChannel.beside(
                self.client("sqs"),
                prefix=session_queue_prefix(settings.stage),
                any_queue_url=next(iter(settings.queue_urls.values())),
            )

        return self._per("session_channel", settings, build)

    def session_commands(self, settings: CoreSettings) -> DynamoCommandLedger:
        """Browser sessions' command records (run once or expired; their steps)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger

        return self._per(
            "session_commands",
            settings,
            lambda: DynamoCommandLedger(self.client("dynamodb"), settings.jobs_table),
        )

    def sessions(
        self, settings: ApiSettings, *, on_lost: Callable[[JobRecord], None] | None = None
    ) -> Sessions:
        """What the API does with browser sessions; ``on_lost`` is told of each session
        found lost (the API's metric)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.browsing.service import Sessions

        return self._per(
            "sessions",
            settings,
            lambda: Sessions(
                self.job_services(settings),
                self.tenancy(settings).quotas,
                self.session_channel(settings),
                commands=self.session_commands(settings),
                presign_ttl_s=settings.presign_ttl_seconds,
                on_lost=on_lost or (lambda job: None),
                saved=self.session_archive(settings),
            ),
        )

    def breakers(self, settings: CoreSettings) -> Breakers:
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.breakers import DomainBreakers

        return self._per(
            "breakers",
            settings,
            lambda: DomainBreakers(self.client("dynamodb"), settings.jobs_table, settings.breaker),
        )

    def event_store(self, jobs_table: str) -> DynamoEventStore:
        """Run events: the worker writes them, the API lists them."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.events import DynamoEventStore

        return self._once(
            ("events", jobs_table), lambda: DynamoEventStore(self.client("dynamodb"), jobs_table)
        )

    def job_data(self, settings: CoreSettings) -> AwsJobData:
        """A job's record, events and artifacts as one (deletion, retention)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.job_data import AwsJobData

        db, s3 = self.client("dynamodb"), self.client("s3")
        return AwsJobData(db, settings.jobs_table, s3, settings.artifacts_bucket)

    def session_archive(self, settings: CoreSettings) -> SessionArchive:
        """The tenants' saved login sessions (the API lists and deletes them)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.tenancy.sessions import SessionArchive

        bucket = settings.artifacts_bucket
        return self._once(("sessions", bucket), lambda: SessionArchive(self.client("s3"), bucket))

    def schedules(self, settings: CoreSettings) -> tuple[ScheduleStore, SchedulerMirror]:
        """Schedule records and their EventBridge Scheduler mirror (the stage's group)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.scheduler import EventBridgeSchedulerMirror, SchedulerTarget
        from pagefleet.errors import NotConfigured

        group, function, role = (
            settings.schedule_group,
            settings.scheduler_target_arn,
            settings.scheduler_role_arn,
        )
        if not (group and function and role):
            raise NotConfigured("schedules are not configured in this deployment")
        target = SchedulerTarget(group, function, role, settings.scheduler_dlq_arn)
        mirror = self._once(
            ("scheduler_mirror", target),
            lambda: EventBridgeSchedulerMirror(self.client("scheduler"), target),
        )
        return self.schedule_store(settings), mirror

    def schedule_store(self, settings: CoreSettings) -> ScheduleStore:
        """Schedule records (the scheduler function fires them without the mirror)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.schedules import DynamoScheduleStore

        return self._once(
            ("schedule_store", settings.jobs_table),
            lambda: DynamoScheduleStore(self.client("dynamodb"), settings.jobs_table),
        )

    # --- tenants --------------------------------------------------------------------------
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
            )

        return self._per("tenancy", settings, build)

    # --- the jobs stream, live runs, notifications ----------------------------------------
    def change_consumers(self, settings: CoreSettings) -> list[ChangeConsumer]:
        from pagefleet.change_wiring import change_consumers  # its docstring says what

        return self._per("changes", settings, lambda: change_consumers(self, settings))

    def live_services(self, settings: LiveSettings) -> LiveServices:
        """What the WebSocket routes and the idle reaper use (``functions/live``)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb import DynamoJobStore
        from pagefleet.adapters.dynamodb.connections import DynamoConnections
        from pagefleet.adapters.live import ApiGatewayPoster
        from pagefleet.live.service import LiveServices

        def build() -> LiveServices:
            db = self.client("dynamodb")
            return LiveServices(
                connections=DynamoConnections(db, settings.connections_table),
                poster=ApiGatewayPoster(self.management_client(settings.live_endpoint)),
                jobs=DynamoJobStore(db, settings.jobs_table),
                events=self.event_store(settings.jobs_table),
                tenants=self.tenant_store(settings.tenants_table),
                idle_unsubscribed_s=settings.idle_unsubscribed_s,
                max_rooms=settings.max_rooms,
                connection_ttl_s=settings.connection_ttl_s,
            )

        return self._per("live", settings, build)

    def signing_secrets(self, stage: str) -> SecretsManagerSigningSecrets:
        """The tenants' webhook signing secrets (the API, the sender, the CLI)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.notify import SecretsManagerSigningSecrets

        return self._once(
            ("signing", stage),
            lambda: SecretsManagerSigningSecrets(self.client("secretsmanager"), stage),
        )

    def live_api(self, settings: ApiSettings) -> LiveApi:
        """What the API's live and notification routes use."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.connections import DynamoConnections
        from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults

        def build() -> LiveApi:
            db = self.client("dynamodb")
            table = settings.connections_table
            return LiveApi(
                events=self.event_store(settings.jobs_table),
                deliveries=DynamoDeliveries(db, settings.jobs_table),
                defaults=DynamoNotifyDefaults(db, settings.tenants_table),
                secrets=self.signing_secrets(settings.stage),
                connections=DynamoConnections(db, table) if table else None,
                live_url=settings.live_url,
                allow_loopback=settings.allow_loopback,
            )

        return self._per("live-api", settings, build)

    def webhook_sender(self, settings: WebhookSettings) -> tuple[WebhookSender, SqsWebhookQueue]:
        """The sender and its queue (``functions/webhooks``)."""
        import httpx  # its command line imports pygments, rich and click: the sender only

        from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries
        from pagefleet.adapters.notify import SqsWebhookQueue
        from pagefleet.notify.sender import WebhookSender
        from pagefleet.specs.resources import WEBHOOK_ATTEMPTS
        from pagefleet.targets.egress_policy import EgressPolicy, system_lookup

        def build() -> tuple[WebhookSender, SqsWebhookQueue]:
            sender = WebhookSender(
                self.signing_secrets(settings.stage),
                DynamoDeliveries(self.client("dynamodb"), settings.jobs_table),
                policy=EgressPolicy(allow_loopback=settings.allow_loopback),
                resolve=system_lookup,
                # Never through a proxy from the environment: the checked address is the target.
                http=httpx.Client(trust_env=False),
                max_attempts=WEBHOOK_ATTEMPTS,
                backoff_base_s=settings.backoff_base_s,
                backoff_cap_s=settings.backoff_cap_s,
                timeout_s=settings.timeout_s,
            )
            return sender, SqsWebhookQueue(self.client("sqs"), settings.queue_url)

        return self._per("webhooks", settings, build)


RUNTIME = Runtime()
