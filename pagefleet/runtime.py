"""The one place a process builds its settings, AWS clients, adapters and services.

Handlers, the worker and the CLI ask ``RUNTIME`` for what they need; it builds each thing
once, on first use (never at import), and keeps it for the life of the process, as a Lambda
execution environment keeps its globals warm. Tests and the local stack call
``RUNTIME.reset()`` to forget everything built against another endpoint or environment.

``AWS_ENDPOINT_URL`` (set by the local stack) points every client at the embedded AWS, so
no code path differs between the local stack and AWS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
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

    from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
    from pagefleet.jobs.changes import ChangeConsumer
    from pagefleet.jobs.service import JobServices
    from pagefleet.schedules.service import SchedulerMirror, ScheduleStore
    from pagefleet.specs.settings import CoreSettings
    from pagefleet.targets.breakers import Breakers
    from pagefleet.tenancy.service import Tenancy

# Standard retry mode backs off on throttling; adaptive would also rate-limit the client.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32)
# S3 presigned URLs must be SigV4: regions opened since 2014 (ap-south-1 among them) refuse
# botocore's legacy default for S3.
_S3_CONFIG = _CONFIG.merge(Config(signature_version="s3v4"))

# A string bound: pydantic_settings is imported with the first settings class, not here.
S = TypeVar("S", bound="BaseSettings")
T = TypeVar("T")


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

    # --- settings -------------------------------------------------------------------------
    def settings(self, cls: type[S]) -> S:
        """The runtime's settings, read from the environment and validated once."""
        return self._once(("settings", cls), cls)

    # --- clients --------------------------------------------------------------------------
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
            config = _S3_CONFIG if service == "s3" else _CONFIG
            if self._session is None:
                self._session = boto3.session.Session()
            made = self._session.client(service, config=config)  # type: ignore[call-overload]
            if self._faults is not None:
                self._faults.attach(made)
            return made

        return self._once(("client", service), build)

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

    # --- adapters and services ------------------------------------------------------------
    def job_services(self, settings: CoreSettings) -> JobServices:
        from pagefleet.adapters.dynamodb import CursorCodec, DynamoJobStore
        from pagefleet.adapters.dynamodb.workflows import DynamoWorkflowStore
        from pagefleet.adapters.s3 import S3ArtifactStore
        from pagefleet.adapters.sqs import SqsJobQueue
        from pagefleet.jobs.service import JobServices

        if settings.aws_fault_rate > 0 and self._faults is None:
            self.inject_faults(settings.aws_fault_rate)

        def build() -> JobServices:
            return JobServices(
                store=DynamoJobStore(self.client("dynamodb"), settings.jobs_table),
                queue=SqsJobQueue(self.client("sqs"), settings.queue_urls),
                artifacts=S3ArtifactStore(self.client("s3"), settings.artifacts_bucket),
                cursors=CursorCodec(),
                workflows=DynamoWorkflowStore(self.client("dynamodb"), settings.jobs_table),
                hooks=self.tenancy(settings).gate,
            )

        return self._once(("jobs", settings.model_dump_json()), build)

    def tenancy(self, settings: CoreSettings) -> Tenancy:
        """Tenant limits, counters, audit and usage (the lifecycle's hooks among them)."""
        from pagefleet.tenant_runtime import build_tenancy

        return self._once(
            ("tenancy", settings.model_dump_json()),
            lambda: build_tenancy(self.client("dynamodb"), settings),
        )

    def breakers(self, settings: CoreSettings) -> Breakers:
        from pagefleet.adapters.dynamodb.breakers import DomainBreakers

        return self._once(
            ("breakers", settings.model_dump_json()),
            lambda: DomainBreakers(self.client("dynamodb"), settings.jobs_table, settings.breaker),
        )

    def change_consumers(self, settings: CoreSettings) -> list[ChangeConsumer]:
        """What reacts to job changes (the jobs stream's one reader calls each in turn)."""

        from pagefleet.jobs.dependencies import DependencyRelease

        def build() -> list[ChangeConsumer]:
            from pagefleet.live_wiring import live_and_notify_consumers, schedule_notices
            from pagefleet.schedules.watch import ScheduleWatch
            from pagefleet.tenant_runtime import retention_consumer

            db, s3 = self.client("dynamodb"), self.client("s3")
            release = DependencyRelease(self.job_services(settings).lifecycle)
            retention = retention_consumer(db, s3, settings, self.tenancy(settings))
            # Schedules' health (a monitor's baseline, alerts), whatever notifies of it.
            watch = ScheduleWatch(self.schedule_store(settings), schedule_notices(self, settings))
            return [release, retention, watch, *live_and_notify_consumers(self, settings)]

        return self._once(("changes", settings.model_dump_json()), build)

    def cached(self, key: Any, build: Callable[[], T]) -> T:
        """Built once per process (until ``reset``): services wired outside this module."""
        return self._once(("cached", key), build)

    def schedule_store(self, settings: CoreSettings) -> ScheduleStore:
        from pagefleet.adapters.dynamodb.schedules import DynamoScheduleStore

        return self._once(
            ("schedule_store", settings.jobs_table),
            lambda: DynamoScheduleStore(self.client("dynamodb"), settings.jobs_table),
        )

    def schedules(self, settings: CoreSettings) -> tuple[ScheduleStore, SchedulerMirror]:
        """Schedule records and their EventBridge Scheduler mirror (the stage's group)."""
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

    def tenant_store(self, tenants_table: str) -> DynamoTenantStore:
        from pagefleet.adapters.dynamodb import DynamoTenantStore

        return self._once(
            ("tenants", tenants_table),
            lambda: DynamoTenantStore(self.client("dynamodb"), tenants_table),
        )


RUNTIME = Runtime()
