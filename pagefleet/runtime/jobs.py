"""Builders of the jobs' parts: job services (with the submission policy), browser sessions,
breakers, run events, job data, saved logins and schedules."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagefleet.adapters.dynamodb.events import DynamoEventStore
    from pagefleet.adapters.dynamodb.inboxes import DynamoInboxRegistry
    from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
    from pagefleet.adapters.job_data import AwsJobData
    from pagefleet.adapters.session_inbox import SqsSessionInbox
    from pagefleet.browsing.service import Sessions
    from pagefleet.browsing.takeover import Takeovers
    from pagefleet.jobs.record import JobRecord
    from pagefleet.jobs.service import JobServices
    from pagefleet.schedules.service import SchedulerMirror, ScheduleStore
    from pagefleet.specs.settings import (
        ApiSettings,
        CoreSettings,
    )
    from pagefleet.targets.breakers import Breakers
    from pagefleet.tenancy.sessions import SessionArchive

from pagefleet.runtime.tenants import TenantBuilders


class JobBuilders(TenantBuilders):
    def job_services(self, settings: CoreSettings) -> JobServices:
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb import CursorCodec, DynamoJobStore
        from pagefleet.adapters.dynamodb.workflows import DynamoWorkflowStore
        from pagefleet.adapters.s3 import S3ArtifactStore
        from pagefleet.adapters.sqs import SqsJobQueue
        from pagefleet.jobs.service import JobServices
        from pagefleet.jobs.submit_policy import SubmitPolicy
        from pagefleet.tenancy.spend import job_cost_cap

        if settings.aws_fault_rate > 0 and self._faults is None:
            self.inject_faults(settings.aws_fault_rate)

        def build() -> JobServices:
            db = self.client("dynamodb")
            tenancy = self.tenancy(settings)
            return JobServices.of(
                DynamoJobStore(db, settings.jobs_table),
                SqsJobQueue(self.client("sqs"), settings.queue_urls),
                S3ArtifactStore(self.client("s3"), settings.artifacts_bucket),
                CursorCodec(),
                workflows=DynamoWorkflowStore(db, settings.jobs_table),
                hooks=tenancy.gate,
                policy=SubmitPolicy(
                    allow_loopback=settings.allow_loopback,
                    evaluate_allowed=tenancy.evaluate_allowed,
                    trace_default=tenancy.trace_default,
                    pools=settings.pools,
                    pools_allowed=tenancy.pools_allowed,
                    pool_names=settings.pool_names,
                    price_cap=partial(job_cost_cap, worker=settings.pricing_worker),
                ),
            )

        return self._per("jobs", settings, build)

    def session_inbox(self, settings: CoreSettings) -> SqsSessionInbox:
        """The workers' command inboxes (the API wakes, the workers make and read them)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.session_inbox import SqsSessionInbox

        return self._per(
            "session_inbox",
            settings,
            lambda: SqsSessionInbox.beside(
                self.client("sqs"), any_queue_url=next(iter(settings.queue_urls.values()))
            ),
        )

    def inbox_registry(self, settings: CoreSettings) -> DynamoInboxRegistry:
        """Which inboxes have a live worker (the workers renew, the sweeper reads)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.inboxes import DynamoInboxRegistry

        return self._per(
            "inbox_registry",
            settings,
            lambda: DynamoInboxRegistry(self.client("dynamodb"), settings.jobs_table),
        )

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
                self.session_inbox(settings),
                commands=self.session_commands(settings),
                stage=settings.stage,
                pricing=settings.pricing_worker,
                presign_ttl_s=settings.presign_ttl_seconds,
                on_lost=on_lost or (lambda job: None),
                saved=self.session_archive(settings),
            ),
        )

    def takeovers(self, settings: ApiSettings) -> Takeovers:
        """What the API does when a person takes over a running job's page."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.takeover_inputs import DynamoTakeoverInputs
        from pagefleet.browsing.takeover import Takeovers

        return self._per(
            "takeovers",
            settings,
            lambda: Takeovers(
                self.sessions(settings),
                DynamoTakeoverInputs(self.client("dynamodb"), settings.jobs_table),
                self.event_store(settings.jobs_table),
                idle_s=settings.takeover_idle_s,
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
