"""Browser sessions' transport: IAM on the workers' command inboxes; the lost alarm, and the
alarm on leftovers that keep coming (what ended sessions left behind, removed by the
sweeper and the live reaper).

No queue per session (docs/decisions.md, 2026-12-05). Each worker process makes one inbox
queue when it starts and deletes it when it stops; the API sends it wake-ups (ids only:
the commands and their answers are in the tenant's partition of the command ledger); the
sweeper deletes the inbox of a worker that was killed. Inboxes are not stack resources (a
task's life is shorter than a deploy's), so the grants name them by their prefix,
``pagefleet-<stage>-inbox-``, and nothing else; ListQueues takes no queue ARN (AWS's SQS
permissions reference names ``arn:aws:sqs:region:account_id:*`` as its resource), and the
sweeper lists with that prefix only.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.nag import acknowledge, resource_text
from pagefleet.specs.metrics_names import (
    LEFTOVERS_REMOVED,
    SESSIONS_LOST,
    SESSIONS_SERVICE,
    stage_namespace,
)
from pagefleet.specs.resources import inbox_queue_prefix

from .alerts import Alerts

# The API wakes a session's worker; a worker makes its inbox at start (and checks it is
# usable), takes its wake-ups, and deletes it at stop; the sweeper deletes a dead worker's.
API_ACTIONS = ("sqs:SendMessage",)
WORKER_ACTIONS = (
    "sqs:CreateQueue",
    "sqs:GetQueueAttributes",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:DeleteQueue",
)
SWEEPER_ACTIONS = ("sqs:GetQueueAttributes", "sqs:DeleteQueue")
# A leftover is repaired by the next pass; this many in an hour is a crash loop or a bug.
LEFTOVERS_ALARM_COUNT = 10


class BrowserSessions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        api_role: iam.IGrantable,
        worker_roles: list[iam.IGrantable],
        sweeper_role: iam.IGrantable,
        alerts: Alerts,
        lost_alarm_count: int = 3,
    ) -> None:
        super().__init__(scope, construct_id)
        self._namespace_stage = stage  # the metrics' namespace is the stage's
        stack = Stack.of(self)
        self.queues_arn = stack.format_arn(service="sqs", resource=f"{inbox_queue_prefix(stage)}*")
        self._grant(api_role, API_ACTIONS)
        for role in worker_roles:
            self._grant(role, WORKER_ACTIONS)
        self._grant(sweeper_role, SWEEPER_ACTIONS)
        listing = stack.format_arn(service="sqs", resource="*")
        sweeper_role.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:ListQueues"], resources=[listing])
        )
        if isinstance(sweeper_role.grant_principal, Construct):
            acknowledge(
                sweeper_role.grant_principal,
                f"IAM5[Resource::{resource_text(self, listing)}]",
                "ListQueues has no queue-level resource (AWS's SQS permissions reference: "
                "arn:aws:sqs:region:account_id:*); the sweeper lists the inbox prefix only.",
            )
        self.lost_alarm = alerts.notify(
            self._sum_alarm(
                "SessionsLostAlarm",
                f"{lost_alarm_count} or more browser sessions lost in 5 minutes: their "
                "workers stopped heartbeating (crashed, killed, out of memory); counted by "
                "the API, the workers' lease watch and the sweeper",
                metric_name=SESSIONS_LOST,
                period=Duration.minutes(5),
                threshold=lost_alarm_count,
            ),
            runbook="browser-sessions-lost",
        )
        self.leftovers_alarm = alerts.notify(
            self._sum_alarm(
                "LeftoversAlarm",
                f"{LEFTOVERS_ALARM_COUNT} or more leftovers of ended jobs and sessions "
                "removed in an hour (running slots, killed workers' inboxes, followers of "
                "ended sessions): each was repaired, but something keeps leaving them",
                metric_name=LEFTOVERS_REMOVED,
                period=Duration.hours(1),
                threshold=LEFTOVERS_ALARM_COUNT,
            ),
            runbook="leftovers-removed",
        )

    def _sum_alarm(
        self,
        construct_id: str,
        description: str,
        *,
        metric_name: str,
        period: Duration,
        threshold: int,
    ) -> cw.Alarm:
        """At ``threshold`` or more in ``period``, of a count every runtime publishes under
        the sessions' one service."""
        return cw.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=cw.Metric(
                namespace=stage_namespace(self._namespace_stage),
                metric_name=metric_name,
                dimensions_map={"service": SESSIONS_SERVICE},
                statistic="Sum",
                period=period,
            ),
            threshold=threshold,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
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
                "Workers' command inboxes are made per worker process at run time: the "
                "wildcard is the stage's inbox prefix, no other queue.",
            )
