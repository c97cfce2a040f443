"""Sweeper: every minute, re-enqueue jobs whose message was lost and expire deadlines."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra import grants
from pagefleet.specs.settings import CoreSettings

from .job_queues import JobQueues
from .job_store import JobStore
from .lambda_factory import LambdaFactory
from .schedules import Schedules


class Sweeper(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: LambdaFactory,
        store: JobStore,
        queues: JobQueues,
        core_env: dict[str, str],
        schedules: Schedules,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = functions.function(
            "sweeper",
            settings_cls=CoreSettings,
            description="pagefleet: re-enqueue lost jobs, expire jobs past their deadline",
            timeout_seconds=50,
            # The next tick is a minute away; a retry would only overlap it.
            retry_attempts=0,
            env={**core_env, **schedules.api_settings()},
        )
        # It mirrors again the schedules whose Scheduler mirror failed to update.
        schedules.grant_manage(self.function)
        grants.table(self.function, store.jobs, grants.JOBS_SWEEPER)
        for q in queues.all:
            grants.queue(self.function, q.queue, grants.QUEUE_SEND)
        self.rule = events.Rule(
            self,
            "EveryMinute",
            description="pagefleet sweeper tick",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
