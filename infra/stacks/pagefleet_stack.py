"""The pagefleet stack: the whole platform, one construct per concern.

client ─HTTPS─> Api (REST API + authorizer + api function; tenant limits, usage, audit;
                  ApiFirewall: WAF; ApiGatewayAccount: the logging role its stages wait for)
                  ├─> JobStore (DynamoDB: jobs, tenants)
                  └─> JobQueues (SQS per pool + DLQ) ─> BrowserWorkers (Fargate per pool)
                                       DLQ ─> DeadLetters        ├─> ArtifactsBucket (S3)
TenantIsolation: the job role workers assume per tenant (tagged); tenancy grants, alarm
EventBridge rate(1 minute) ─> Sweeper                            └─> JobStore
jobs table stream ─> JobChanges (its one reader: dependants, live delivery, notifications)
Live (WebSocket API + connections table + live function) <─ JobChanges posts to followers
Notifications (webhook queue + DLQ + sender; EventBridge "Job Finished") <─ JobChanges
Alarms (dead letters, functions, tasks, tables, sweeper) ─> Alerts (SNS) <─ Monitoring
(dashboard + job alarms); Backups (AWS Backup plan of the tables, where configured)
Console: CloudFront ─┬─ /console/* ─> S3 (the web console's files, config.json)
                     └─ /v1/*      ─> Api (one origin for the page and the API: no CORS)
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Aspects, CfnOutput, Stack, Tags
from constructs import Construct

import pagefleet
from infra.config import StageConfig
from infra.constructs import dead_letters
from infra.constructs.alarms import Alarms
from infra.constructs.alerts import Alerts
from infra.constructs.api import Api, pricing_worker
from infra.constructs.api_account import ApiGatewayAccount
from infra.constructs.artifacts import ArtifactsBucket
from infra.constructs.backups import Backups
from infra.constructs.browser_sessions import BrowserSessions
from infra.constructs.browser_workers import BrowserWorkers
from infra.constructs.console import Console
from infra.constructs.dead_letters import DeadLetters
from infra.constructs.image_scanning import ImageScanning
from infra.constructs.job_changes import JobChanges
from infra.constructs.job_queues import QUEUE_URL_PREFIX, JobQueues
from infra.constructs.job_store import JobStore
from infra.constructs.lambda_factory import LambdaFactory
from infra.constructs.live import Live
from infra.constructs.monitoring import Monitoring
from infra.constructs.notifications import Notifications
from infra.constructs.removal import DestroyWithStack
from infra.constructs.schedules import Schedules
from infra.constructs.sweeper import Sweeper
from infra.constructs.tenant_isolation import TenantIsolation


class PagefleetStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        Tags.of(self).add("project", "pagefleet")
        Tags.of(self).add("stage", config.stage)
        if not config.retain_data:  # dev: its logs and keys go with `cdk destroy`
            Aspects.of(self).add(DestroyWithStack())

        self.alerts = Alerts(
            self,
            "Alerts",
            email=config.alarm_email,
            subscriber_required=config.alarm_subscriber_required,
        )
        self.store = JobStore(
            self, "JobStore", retain=config.retain_data, restored=config.restored_tables
        )
        self.queues = JobQueues(
            self,
            "JobQueues",
            pools=config.pool_names,
            alerts=self.alerts,
            oldest_age_alarm_seconds=config.oldest_age_alarm_seconds,
            dlq_visibility_timeout_s=dead_letters.DLQ_VISIBILITY_S,
        )
        self.artifacts = ArtifactsBucket(self, "Artifacts", retain=config.retain_data)
        # {"standard": url, "heavy": url}: the tasks' PAGEFLEET_QUEUE_URLS; the functions get
        # names and one prefix (their environment holds 4 KB: infra/function_env.py).
        queue_urls_json = self.to_json_string(self.queues.queue_urls())
        queue_names_json = self.to_json_string(self.queues.queue_names())
        core_env = {
            "jobs_table": self.store.jobs.table_name,
            "tenants_table": self.store.tenants.table_name,
            "artifacts_bucket": self.artifacts.bucket.bucket_name,
            "queue_url_prefix": QUEUE_URL_PREFIX,
            "queue_urls": queue_names_json,
            "stage": config.stage,
            "usage_table": self.store.usage.table_name,
            "tenant_defaults": config.tenant_defaults.model_dump_json(),
            "pools": config.pool_offers(),
            # Every runtime that makes jobs prices a max_cost_usd alike (jobs.spend).
            "pricing_worker": json.dumps(pricing_worker(config)),
        }
        self.tenants = TenantIsolation(
            self,
            "TenantIsolation",
            stage=config.stage,
            store=self.store,
            artifacts=self.artifacts,
            alerts=self.alerts,
            refusals_alarm_count=config.tenant_refusals_alarm_count,
        )

        self.functions = LambdaFactory(
            self,
            "Functions",
            stage=config.stage,
            log_retention=config.log_retention,
            bundle_dependencies=config.bundle_dependencies,
            inspect_only=config.inspect_only,
            reserved_concurrency=config.reserved_concurrency,
        )
        self.schedules = Schedules(
            self,
            "Schedules",
            stage=config.stage,
            functions=self.functions,
            store=self.store,
            queues=self.queues,
            alerts=self.alerts,
            core_env=core_env,
        )
        self.api_account = ApiGatewayAccount(self, "ApiGatewayAccount", config=config)
        self.image_scanning = ImageScanning(self, "ImageScanning", config=config)
        self.api = Api(
            self,
            "Api",
            config=config,
            functions=self.functions,
            store=self.store,
            queues=self.queues,
            artifacts=self.artifacts,
            schedules=self.schedules,
            tenancy_env=core_env,
            account=self.api_account,
        )
        self.dead_letters = DeadLetters(
            self,
            "DeadLetters",
            functions=self.functions,
            store=self.store,
            queues=self.queues,
            core_env=core_env,
        )
        self.sweeper = Sweeper(
            self,
            "Sweeper",
            functions=self.functions,
            store=self.store,
            queues=self.queues,
            core_env=core_env,
            schedules=self.schedules,
        )
        self.workers = BrowserWorkers(
            self,
            "BrowserWorkers",
            config=config,
            store=self.store,
            queues=self.queues,
            artifacts=self.artifacts,
            queue_urls_json=queue_urls_json,
            tenants=self.tenants,
        )
        self.job_changes = JobChanges(
            self,
            "JobChanges",
            functions=self.functions,
            store=self.store,
            queues=self.queues,
            alerts=self.alerts,
            core_env=core_env,
        )
        self.live = Live(
            self,
            "Live",
            config=config,
            functions=self.functions,
            store=self.store,
            api_function=self.api.handler,
            changes_function=self.job_changes.function,
            alerts=self.alerts,
            account=self.api_account,
        )
        self.live.send_frames_from(self.workers.pools.values())
        self.notifications = Notifications(
            self,
            "Notifications",
            config=config,
            functions=self.functions,
            store=self.store,
            api_function=self.api.handler,
            changes_function=self.job_changes.function,
        )
        self.tenants.grant_functions(self.functions.functions)
        self.browser_sessions = BrowserSessions(
            self,
            "BrowserSessions",
            stage=config.stage,
            api_role=self.api.handler,
            worker_roles=[p.task_definition.task_role for p in self.workers.pools.values()],
            sweeper_role=self.sweeper.function,
            alerts=self.alerts,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            config=config,
            alerts=self.alerts,
            functions=self.functions,
            workers=self.workers,
            store=self.store,
            sweeper=self.sweeper,
        )
        self.backups = (
            Backups(
                self,
                "Backups",
                tables=[self.store.jobs, self.store.tenants, self.store.usage],
                retention_days=config.backup_retention_days,
                retain=config.retain_data,
                alerts=self.alerts,
                log_retention=config.log_retention,
            )
            if config.backup_retention_days
            else None
        )
        self.console = Console(
            self,
            "Console",
            config=config,
            api=self.api,
            live=self.live,
            artifacts=self.artifacts,
            changes_function=self.job_changes.function,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            alerts=self.alerts,
            queues=self.queues,
            workers=self.workers,
            api=self.api,
            functions=self.functions,
        )

        # The base the clients take (PAGEFLEET_API_URL): routes are <base>/v1/..., the stage
        # being the version, so the base is the API's domain without the stage.
        CfnOutput(
            self,
            "ApiUrl",
            value=f"https://{self.api.rest_api.rest_api_id}.execute-api.{self.region}."
            f"{self.url_suffix}",
            description="REST API base URL (PAGEFLEET_API_URL); routes are under /v1/",
        )
        CfnOutput(
            self,
            "ConsoleUrl",
            value=self.console.url,
            description="The web console (sign in with a tenant API key)",
        )
        CfnOutput(
            self,
            "ConsoleDistributionId",
            value=self.console.distribution.distribution_id,
            description="CloudFront distribution of the console and /v1/* (invalidations)",
        )
        CfnOutput(
            self, "LiveUrl", value=self.live.stage.url, description="WebSocket API (live runs)"
        )
        CfnOutput(self, "DashboardUrl", value=self.monitoring.dashboard_url)
        CfnOutput(self, "AlarmTopicArn", value=self.alerts.topic.topic_arn)
        CfnOutput(self, "JobsTableName", value=self.store.jobs.table_name)
        CfnOutput(
            self,
            "TenantsTableName",
            value=self.store.tenants.table_name,
            description="PAGEFLEET_TENANTS_TABLE for `pagefleet admin create-key`",
        )
        CfnOutput(self, "ArtifactsBucketName", value=self.artifacts.bucket.bucket_name)
        CfnOutput(self, "ClusterName", value=self.workers.cluster.cluster_name)
        CfnOutput(
            self,
            "Version",
            value=pagefleet.__version__,
            description="The pagefleet release deployed (CHANGELOG.md; GET /v1/health says it too)",
        )
