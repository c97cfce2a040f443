"""Operational alarms: what breaks without a failed job to show it.

- dead letters: every DLQ of the stack (any queue's redrive target, plus registered ones)
  alarms when a message arrives, even if its consumer takes it within seconds, and the
  dead-letters function's ``JobsDeadLettered`` metric alarms per marked job;
- each Lambda function's errors and throttles;
- each worker pool's running tasks below desired, and tasks stopping abnormally (crash,
  failed start, failed health check), recorded in a log group with their reasons;
- DynamoDB throttling per table;
- the sweeper not running, or EventBridge failing to invoke it;
- a running job's lease over for more than twice a lease and not taken back.

Every alarm notifies the alerts topic and links its entry in docs/runbooks.md.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StageConfig
from pagefleet.specs import metrics_names as m
from pagefleet.specs.resources import LEASE_SECONDS

from .alerts import Alerts
from .browser_workers import BrowserWorkers
from .job_store import JobStore
from .lambda_factory import LambdaFactory, service_name
from .sweeper import Sweeper

MINUTE = Duration.minutes(1)
# ECS stop codes of a task that ended on its own; scale-in and deploys say
# ServiceSchedulerInitiated, and so does a failed health check (matched by its reason).
ABNORMAL_STOP_CODES = ["TaskFailedToStart", "EssentialContainerExited"]
HEALTH_CHECK_STOP_REASON = "Task failed container health checks"


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))


def events_log_group(
    scope: Construct, construct_id: str, *, retention: logs.RetentionDays
) -> logs.LogGroup:
    """A log group EventBridge rules may write to. Its resource policy is written here
    rather than by CDK's log-group target, which adds a custom-resource Lambda for it."""
    group = logs.LogGroup(scope, construct_id, retention=retention)
    logs.ResourcePolicy(
        scope,
        f"{construct_id}Policy",
        policy_statements=[
            iam.PolicyStatement(
                principals=[
                    iam.ServicePrincipal("events.amazonaws.com"),
                    iam.ServicePrincipal("delivery.logs.amazonaws.com"),
                ],
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[group.log_group_arn],
            )
        ],
    )
    return group


def log_group_target_arn(group: logs.LogGroup) -> str:
    """The ARN an EventBridge target takes (without the ``:*`` of ``log_group_arn``)."""
    return Stack.of(group).format_arn(
        service="logs",
        resource="log-group",
        resource_name=group.log_group_name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def rule_matches(rule: events.CfnRule, *, period: Duration) -> cw.Metric:
    """How often ``rule`` matched an event (the rule needs a target to be counted)."""
    return cw.Metric(
        namespace="AWS/Events",
        metric_name="TriggeredRules",
        dimensions_map={"RuleName": rule.ref},
        statistic="Sum",
        period=period,
    )


def dead_letter_queues(scope: Construct, alerts: Alerts) -> dict[str, sqs.IQueue]:
    """Every queue some queue's redrive policy names in this stack, plus registered DLQs."""
    found: dict[str, sqs.IQueue] = {}
    for construct in Stack.of(scope).node.find_all():
        if isinstance(construct, sqs.Queue) and construct.dead_letter_queue is not None:
            dlq = construct.dead_letter_queue.queue
            found.setdefault(dlq.node.path, dlq)
    for name, queue in alerts.extra_dead_letter_queues.items():
        found.setdefault(name, queue)
    return found


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        alerts: Alerts,
        functions: LambdaFactory,
        workers: BrowserWorkers,
        store: JobStore,
        sweeper: Sweeper,
    ) -> None:
        super().__init__(scope, construct_id)
        self._alerts = alerts
        self._config = config
        self._stopped_tasks: logs.LogGroup | None = None
        self._dead_letters()
        for name, function in functions.functions.items():
            self._function(name, function)
        for name, pool in workers.pools.items():
            self._pool(name, workers, pool.service)
        for table in (store.jobs, store.tenants, store.usage):
            self._table(table)
        self._sweeper(sweeper)

    def _alarm(self, alarm_id: str, runbook: str, **props: Any) -> cw.Alarm:
        return self._alerts.notify(cw.Alarm(self, alarm_id, **props), runbook=runbook)

    # --- dead letters ---------------------------------------------------------------------
    def _dead_letters(self) -> None:
        for path, dlq in dead_letter_queues(self, self._alerts).items():
            alarm_id = _pascal(path.split("/")[-1].replace("DeadLetters", "")) or "Dlq"
            self._alarm(
                f"{alarm_id}DeadLetterQueueAlarm",
                "dead-letter-queue",
                alarm_description=f"Messages reached the dead-letter queue {path}",
                # Received counts a message even when its consumer takes it within seconds
                # (a DLQ's NumberOfMessagesSent does not count redrives); visible counts one
                # that nobody consumes.
                metric=cw.MathExpression(
                    expression="FILL(received, 0) + FILL(visible, 0)",
                    using_metrics={
                        "received": dlq.metric_number_of_messages_received(
                            period=MINUTE, statistic="Sum"
                        ),
                        "visible": dlq.metric_approximate_number_of_messages_visible(
                            period=MINUTE, statistic="Maximum"
                        ),
                    },
                    label="messages arriving or waiting",
                    period=MINUTE,
                ),
                threshold=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
        self._alarm(
            "JobsDeadLetteredAlarm",
            "jobs-dead-lettered",
            alarm_description=(
                "Jobs were marked dead_lettered (their message reached a DLQ, or their "
                "workers kept dying on them)"
            ),
            metric=cw.Metric(
                namespace=m.stage_namespace(self._config.stage),
                metric_name=m.DEAD_LETTERED,
                dimensions_map={m.DIM_SERVICE: service_name("dead_letters")},
                statistic="Sum",
                period=MINUTE,
            ),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    # --- functions ------------------------------------------------------------------------
    def _function(self, name: str, function: lambda_.Function) -> None:
        node = _pascal(name)
        self._alarm(
            f"{node}ErrorsAlarm",
            "lambda-errors",
            alarm_description=f"The {name} function failed in 2 of the last 3 minutes",
            metric=function.metric_errors(period=MINUTE, statistic="Sum"),
            threshold=self._config.lambda_errors_alarm_count,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self._alarm(
            f"{node}ThrottlesAlarm",
            "lambda-throttles",
            alarm_description=f"The {name} function was throttled in 2 of the last 3 minutes",
            metric=function.metric_throttles(period=MINUTE, statistic="Sum"),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    # --- worker tasks ---------------------------------------------------------------------
    def _pool(self, name: str, workers: BrowserWorkers, service: ecs.FargateService) -> None:
        node = _pascal(name)
        dims = {"ClusterName": workers.cluster.cluster_name, "ServiceName": service.service_name}

        def insight(metric_name: str) -> cw.Metric:
            return cw.Metric(
                namespace="ECS/ContainerInsights",
                metric_name=metric_name,
                dimensions_map=dims,
                statistic="Average",
                period=MINUTE,
            )

        self._alarm(
            f"{node}TasksBelowDesiredAlarm",
            "tasks-below-desired",
            alarm_description=(
                f"Pool {name} has run fewer worker tasks than desired for 10 minutes"
            ),
            metric=cw.MathExpression(
                expression="FILL(desired, 0) - FILL(running, 0)",
                using_metrics={
                    "desired": insight("DesiredTaskCount"),
                    "running": insight("RunningTaskCount"),
                },
                label="tasks missing",
                period=MINUTE,
            ),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=10,
            datapoints_to_alarm=10,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

        stops = self._stopped_tasks_log()
        rule = events.CfnRule(
            self,
            f"{node}AbnormalStops",
            description=f"pagefleet: worker tasks of pool {name} that crashed or failed to start",
            event_pattern={
                "source": ["aws.ecs"],
                "detail-type": ["ECS Task State Change"],
                "detail": {
                    "clusterArn": [workers.cluster.cluster_arn],
                    "group": [f"service:{service.service_name}"],
                    "lastStatus": ["STOPPED"],
                    "$or": [
                        {"stopCode": ABNORMAL_STOP_CODES},
                        {"stoppedReason": [{"prefix": HEALTH_CHECK_STOP_REASON}]},
                    ],
                },
            },
            targets=[events.CfnRule.TargetProperty(id="StoppedTasksLog", arn=stops)],
        )
        self._alarm(
            f"{node}TasksStoppingAlarm",
            "tasks-stopping",
            alarm_description=(
                f"Worker tasks of pool {name} keep stopping on their own "
                f"({self._config.task_stops_alarm_count} or more in 15 minutes)"
            ),
            metric=rule_matches(rule, period=Duration.minutes(15)),
            threshold=self._config.task_stops_alarm_count,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _stopped_tasks_log(self) -> str:
        """One log group for every pool's abnormal stops (ECS forgets stopped tasks after
        about an hour; their reasons stay here)."""
        if self._stopped_tasks is None:
            self._stopped_tasks = events_log_group(
                self, "StoppedTasks", retention=self._config.log_retention
            )
        return log_group_target_arn(self._stopped_tasks)

    # --- tables ---------------------------------------------------------------------------
    def _table(self, table: dynamodb.ITable) -> None:
        node = _pascal(table.node.id.replace("Table", "")) or "Table"
        self._alarm(
            f"{node}TableThrottlesAlarm",
            "dynamodb-throttles",
            alarm_description="A pagefleet table throttled reads or writes in 3 of 5 minutes",
            metric=cw.MathExpression(
                expression="FILL(reads, 0) + FILL(writes, 0)",
                using_metrics={
                    "reads": table.metric("ReadThrottleEvents", period=MINUTE, statistic="Sum"),
                    "writes": table.metric("WriteThrottleEvents", period=MINUTE, statistic="Sum"),
                },
                label="throttle events",
                period=MINUTE,
            ),
            threshold=self._config.dynamodb_throttle_alarm_count,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    # --- sweeper --------------------------------------------------------------------------
    def _sweeper(self, sweeper: Sweeper) -> None:
        self._alarm(
            "SweeperNotRunningAlarm",
            "sweeper-not-running",
            alarm_description="The sweeper has not run for 10 minutes (it should every minute)",
            metric=sweeper.function.metric_invocations(period=MINUTE, statistic="Sum"),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=10,
            datapoints_to_alarm=10,
            # No invocations means no data points: that is the failure.
            treat_missing_data=cw.TreatMissingData.BREACHING,
        )
        # A lease is the job queues' visibility timeout (the workers renew it); the sweeper
        # takes a job back within a minute of its end, so twice a lease is a take-back that
        # keeps failing, with the job `running` and no message anywhere to show it.
        lease_s = LEASE_SECONDS
        self._alarm(
            "ExpiredLeaseAlarm",
            "expired-lease",
            alarm_description=(
                f"A running job's lease ended over {2 * lease_s} s ago (twice a lease) and "
                "the sweeper has not taken the job back"
            ),
            metric=cw.Metric(
                namespace=m.stage_namespace(self._config.stage),
                metric_name=m.OLDEST_EXPIRED_LEASE,
                dimensions_map={m.DIM_SERVICE: m.SWEEPER_SERVICE},
                statistic="Maximum",
                period=MINUTE,
            ),
            threshold=2 * lease_s,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self._alarm(
            "SweeperInvokeFailuresAlarm",
            "sweeper-not-running",
            alarm_description="EventBridge failed to invoke the sweeper",
            metric=cw.Metric(
                namespace="AWS/Events",
                metric_name="FailedInvocations",
                dimensions_map={"RuleName": sweeper.rule.rule_name},
                statistic="Sum",
                period=Duration.minutes(5),
            ),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
