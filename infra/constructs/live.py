"""Live: the WebSocket API (API Gateway), its connections table, and the live function.

Routes ``$connect`` (a Bearer API key or a single-use ticket, checked by the function
against the key records), ``$disconnect``, ``subscribe``, ``unsubscribe``, ``watch``,
``unwatch``, ``ping`` and
``$default``, all integrated with ``functions/live``; the message routes return the
function's answer to the client. The same function closes connections that follow nothing
(an EventBridge rule every minute). The jobs stream's reader (``JobChanges``) posts to the
followers through the stage's management API (``@connections``).

API Gateway's own limits apply and are documented (README): 10 minutes idle, 2 hours per
connection, 128 KB per message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import grants
from infra.config import StageConfig
from infra.nag import acknowledge, resource_text
from pagefleet.specs.resources import CONNECTIONS_TABLE
from pagefleet.specs.settings import ApiSettings, ChangesSettings, LiveSettings, WorkerSettings

from .alerts import Alerts
from .api_account import ApiGatewayAccount
from .browser_workers import WorkerPool
from .job_store import JobStore, build_table
from .lambda_factory import LambdaFactory

STAGE_NAME = "live"
TIMEOUT_S = 10
# Client actions with an answer (the route response carries the function's ``body``).
MESSAGE_ROUTES = ("subscribe", "unsubscribe", "watch", "unwatch", "ping", "$default")
# Scan: the reaper's minute reads the connections that follow any room (the table holds live
# connections only), to remove the followers of browser sessions that ended.
CONNECTIONS_RW = (
    "Scan",
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "BatchGetItem",
    "ConditionCheckItem",
)
# The stream reader: followers, their send windows, forgetting gone connections.
CONNECTIONS_DELIVERY = ("GetItem", "UpdateItem", "DeleteItem", "Query", "BatchGetItem")
# Reading jobs (ownership, status), and their watch marks (``pagefleet.live.watch``).
JOBS_LIVE = ("GetItem", "Query", "UpdateItem")
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "time": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "route": "$context.routeKey",
    "event": "$context.eventType",
    "connectionId": "$context.connectionId",
    "status": "$context.status",
    "integrationError": "$context.integrationErrorMessage",
}


def add_env(
    function: lambda_.Function | ecs.ContainerDefinition, settings_cls: type, **values: str
) -> None:
    """Set more of a function's or container's settings (names checked against its
    settings model)."""
    known = set(settings_cls.model_fields)  # type: ignore[attr-defined]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{settings_cls.__name__} has no settings {unknown}")
    prefix = str(settings_cls.model_config.get("env_prefix", ""))  # type: ignore[attr-defined]
    for name, value in values.items():
        function.add_environment(f"{prefix}{name}".upper(), value)


class Live(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        functions: LambdaFactory,
        store: JobStore,
        api_function: lambda_.Function,
        changes_function: lambda_.Function,
        alerts: Alerts,
        account: ApiGatewayAccount,
    ) -> None:
        super().__init__(scope, construct_id)
        # Short-lived items, but kept like every table of a stage that retains its data.
        self.connections: dynamodb.Table = build_table(
            self, CONNECTIONS_TABLE, retain=config.retain_data
        )

        self.api = apigwv2.WebSocketApi(
            self,
            "WebSocketApi",
            api_name=f"pagefleet-{config.stage}-live",
            description=f"pagefleet {config.stage} live runs (WebSocket)",
            route_selection_expression="$request.body.action",
        )
        self.stage = apigwv2.WebSocketStage(
            self,
            "Stage",
            web_socket_api=self.api,
            stage_name=STAGE_NAME,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_throttle_rate, burst_limit=config.api_throttle_burst
            ),
        )
        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=config.log_retention)
        # The stage's execution logs (logging_level below) go to this group; API Gateway
        # would create it itself, never expiring and outside the stack.
        self.execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=f"/aws/apigateway/{self.api.api_id}/{STAGE_NAME}",
            retention=config.log_retention,
        )
        self.stage.node.add_dependency(self.execution_logs)
        cfn_stage = self.stage.node.default_child
        assert isinstance(cfn_stage, apigwv2.CfnStage)
        cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn, format=json.dumps(ACCESS_LOG_FORMAT)
        )
        cfn_stage.default_route_settings = apigwv2.CfnStage.RouteSettingsProperty(
            logging_level="ERROR",
            data_trace_enabled=False,
            detailed_metrics_enabled=True,
            throttling_rate_limit=config.api_throttle_rate,
            throttling_burst_limit=config.api_throttle_burst,
        )
        # Execution and access logging need the account's CloudWatch Logs role first.
        account.logs_through(self.stage)

        self.function = functions.function(
            "live",
            settings_cls=LiveSettings,
            description="pagefleet live: WebSocket routes (connect, follow jobs) and idle reaper",
            timeout_seconds=TIMEOUT_S,
            env={
                "jobs_table": store.jobs.table_name,
                "tenants_table": store.tenants.table_name,
                "connections_table": self.connections.table_name,
                "live_endpoint": self.stage.callback_url,
                "stage": config.stage,
            },
        )
        grants.table(self.function, self.connections, CONNECTIONS_RW)
        grants.table(self.function, store.jobs, JOBS_LIVE)
        grants.table(self.function, store.tenants, grants.TENANTS_READ)
        self._manage_connections(self.function)

        integration = integrations.WebSocketLambdaIntegration("Live", self.function)
        self.routes = [
            self.api.add_route(route, integration=integration, return_response=True)
            for route in MESSAGE_ROUTES
        ]
        self.routes += [
            self.api.add_route(route, integration=integration)
            for route in ("$connect", "$disconnect")
        ]
        self.reaper = events.Rule(
            self,
            "IdleReaper",
            description="pagefleet live: close connections that follow nothing",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )

        # The stream reader posts to followers; the API issues connect tickets.
        add_env(
            changes_function,
            ChangesSettings,
            connections_table=self.connections.table_name,
            live_endpoint=self.stage.callback_url,
        )
        grants.table(changes_function, self.connections, CONNECTIONS_DELIVERY)
        self._manage_connections(changes_function)
        add_env(
            api_function,
            ApiSettings,
            connections_table=self.connections.table_name,
            live_url=self.stage.url,
        )
        grants.table(api_function, self.connections, ("PutItem",))
        self._alarm(alerts)
        self._acknowledge()

    def _manage_connections(self, function: lambda_.Function) -> None:
        """POST / DELETE / GET ``@connections/*`` on this stage only."""
        assert function.role is not None
        self._grant_connections(function.role, "*")

    def _grant_connections(self, role: iam.IRole, method: str) -> None:
        # <api>/live/<POST|GET|DELETE>/@connections/<connection id>
        arn = self.api.arn_for_execute_api_v2(route=f"{method}/@connections/*", stage=STAGE_NAME)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["execute-api:ManageConnections"], resources=[arn])
        )
        acknowledge(
            role,
            f"IAM5[Resource::{resource_text(self, arn)}]",
            "Connection ids are made by API Gateway at connect time; the grant covers the "
            "management API of this one stage.",
        )

    def send_frames_from(self, pools: Iterable[WorkerPool]) -> None:
        """Workers post a watched job's frames to its watchers (``pagefleet.live.watch``):
        ``POST @connections/*`` on this stage, nothing else of it; the connections they
        post to are the ones the live function wrote on the job's record."""
        for pool in pools:
            add_env(pool.container, WorkerSettings, live_endpoint=self.stage.callback_url)
            self._grant_connections(pool.task_definition.task_role, "POST")

    def _alarm(self, alerts: Alerts) -> None:
        minute = Duration.minutes(1)
        alerts.notify(
            cw.Alarm(
                self,
                "ConnectionsTableThrottlesAlarm",
                alarm_description="The live connections table throttled in 3 of 5 minutes",
                metric=cw.MathExpression(
                    expression="FILL(reads, 0) + FILL(writes, 0)",
                    using_metrics={
                        "reads": self.connections.metric(
                            "ReadThrottleEvents", period=minute, statistic="Sum"
                        ),
                        "writes": self.connections.metric(
                            "WriteThrottleEvents", period=minute, statistic="Sum"
                        ),
                    },
                    label="throttle events",
                    period=minute,
                ),
                threshold=10,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=5,
                datapoints_to_alarm=3,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            runbook="dynamodb-throttles",
        )

    def _acknowledge(self) -> None:
        for route in self.routes:
            acknowledge(
                route,
                "APIG4",
                "The live function authenticates $connect itself (a Bearer API key or a "
                "single-use ticket, through the key records); message routes act only for the "
                "tenant recorded at $connect.",
            )
