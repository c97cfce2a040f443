"""Schedules: the stage's EventBridge Scheduler group and the function every schedule fires.

Schedule records (the jobs table) are the source of truth; the API mirrors each one as a
Scheduler schedule in this group, targeting ``functions/scheduler`` with the Scheduler's
own role (which may invoke that function and nothing else), a retry policy and a DLQ
(alarmed). The Scheduler invokes the function asynchronously, so a fire the function fails
is Lambda's: tried again, then recorded in the same DLQ (the function's on-failure
destination). The API may manage schedules in this group only, and pass only that role.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra import grants
from infra.nag import acknowledge, resource_text
from pagefleet.specs.resources import SCHEDULER
from pagefleet.specs.settings import CoreSettings

from .alerts import Alerts
from .job_queues import JobQueues
from .job_store import JobStore
from .lambda_factory import LambdaFactory

TIMEOUT_S = 30
# What the API does with the mirror (pagefleet.adapters.scheduler).
MANAGE_ACTIONS = (
    "scheduler:CreateSchedule",
    "scheduler:UpdateSchedule",
    "scheduler:DeleteSchedule",
    "scheduler:GetSchedule",
)


class Schedules(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        functions: LambdaFactory,
        store: JobStore,
        queues: JobQueues,
        alerts: Alerts,
        core_env: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.group_name = f"pagefleet-{stage}"
        self.group = scheduler.CfnScheduleGroup(self, "Group", name=self.group_name)

        self.dlq = alerts.dead_letter_queue(self, "FailedFires", "SchedulerFires")
        # The Scheduler invokes the function asynchronously: its retry policy and DLQ cover
        # handing a fire to Lambda, not the function failing it. Lambda tries a failed fire
        # again (it is idempotent per fire time), then records it here, alarmed.
        self.function: lambda_.Function = functions.function(
            "scheduler",
            settings_cls=CoreSettings,
            description="pagefleet: one schedule fire -> one job (idempotent per fire time)",
            timeout_seconds=TIMEOUT_S,
            env=core_env,
            retry_attempts=SCHEDULER.function_retries,
            on_failure=destinations.SqsDestination(self.dlq),
        )
        grants.table(self.function, store.jobs, grants.JOBS_SCHEDULER)
        for q in queues.all:
            grants.queue(self.function, q.queue, grants.QUEUE_SEND)

        # The role EventBridge Scheduler assumes to fire a schedule: invoke this one function.
        self.role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description="pagefleet: EventBridge Scheduler invokes the scheduler function",
        )
        self.function.grant_invoke(self.role)
        self.dlq.grant_send_messages(self.role)
        acknowledge(
            self.role,
            f"IAM5[Resource::<{grants.logical_id(self.function)}.Arn>:*]",
            "grant_invoke names the function and its versions; nothing else is invocable.",
        )

    @property
    def schedules_arn(self) -> str:
        """Every schedule of this stage's group."""
        return Stack.of(self).format_arn(
            service="scheduler",
            resource="schedule",
            resource_name=f"{self.group_name}/*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def api_settings(self) -> dict[str, str]:
        """The API's settings for the mirror (ApiSettings' scheduler fields)."""
        return {
            "schedule_group": self.group_name,
            "scheduler_target_arn": self.function.function_arn,
            "scheduler_role_arn": self.role.role_arn,
            "scheduler_dlq_arn": self.dlq.queue_arn,
        }

    def grant_manage(self, principal: lambda_.Function) -> None:
        """Manage schedules in this group only, and pass only the Scheduler's role."""
        principal.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=list(MANAGE_ACTIONS), resources=[self.schedules_arn])
        )
        assert principal.role is not None
        acknowledge(
            principal.role,
            f"IAM5[Resource::{resource_text(self, self.schedules_arn)}]",
            "Schedules are made at run time, one per schedule record: the stage's group only.",
        )
        principal.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )
