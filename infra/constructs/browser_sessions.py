"""Browser sessions' queues: IAM for the API and the workers on them, and the lost alarm.

Each session gets a command and an answer queue, made by the API when it opens and deleted
when it ends (docs/decisions.md, 2026-12-01): they are not stack resources, so the grants
name them by their prefix, ``pagefleet-<stage>-session-``, and nothing else.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.nag import acknowledge, resource_text
from pagefleet.specs.metrics_names import SESSIONS_LOST, SESSIONS_SERVICE, stage_namespace
from pagefleet.specs.resources import session_queue_prefix

from .alerts import Alerts

# The API opens, commands, waits for answers and deletes the queues of a session it finds
# ended; a worker takes commands, answers and deletes the queues when the session ends.
API_ACTIONS = (
    "sqs:CreateQueue",
    "sqs:SendMessage",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteQueue",
)
WORKER_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:SendMessage", "sqs:DeleteQueue")


class BrowserSessions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        api_role: iam.IGrantable,
        worker_roles: list[iam.IGrantable],
        alerts: Alerts,
        lost_alarm_count: int = 3,
    ) -> None:
        super().__init__(scope, construct_id)
        self.queues_arn = Stack.of(self).format_arn(
            service="sqs", resource=f"{session_queue_prefix(stage)}*"
        )
        self._grant(api_role, API_ACTIONS)
        for role in worker_roles:
            self._grant(role, WORKER_ACTIONS)
        self.lost_alarm = alerts.notify(
            cw.Alarm(
                self,
                "SessionsLostAlarm",
                alarm_description=(
                    f"{lost_alarm_count} or more browser sessions lost in 5 minutes: their "
                    "workers stopped heartbeating (crashed, killed, out of memory); counted by "
                    "the API, the workers' lease watch and the sweeper"
                ),
                metric=cw.Metric(
                    namespace=stage_namespace(stage),
                    metric_name=SESSIONS_LOST,
                    dimensions_map={"service": SESSIONS_SERVICE},
                    statistic="Sum",
                    period=Duration.minutes(5),
                ),
                threshold=lost_alarm_count,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            runbook="browser-sessions-lost",
        )

    def _grant(self, principal: iam.IGrantable, actions: tuple[str, ...]) -> None:
        principal.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=[self.queues_arn])
        )
        role = principal.grant_principal
        if isinstance(role, Construct):
            acknowledge(
                role,
                f"IAM5[Resource::{resource_text(self, self.queues_arn)}]",
                "Browser sessions' queues are made per session at run time: the wildcard is "
                "the stage's session queue prefix, no other queue.",
            )
