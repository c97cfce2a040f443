"""Notifications: completion webhooks (their own queue, DLQ and sender) and EventBridge events.

The jobs stream's reader (``JobChanges``) queues one message per final transition that has
a webhook and puts a ``Job Finished`` event on the default bus. ``functions/webhooks`` POSTs
each message signed with the tenant's secret (``pagefleet-webhooks/<stage>/<tenant>`` in
Secrets Manager); a failed POST hides the message for its backoff, so the queue retries it
for hours, then moves it to the DLQ (alarmed, like every DLQ of the stack).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import grants
from infra.config import StageConfig
from infra.nag import acknowledge, resource_text
from pagefleet.specs.resources import WEBHOOK_QUEUE
from pagefleet.specs.settings import ChangesSettings, WebhookSettings

from .job_store import JobStore
from .lambda_factory import LambdaFactory, sqs_visibility_for
from .live import add_env

TIMEOUT_S = 40
BATCH_SIZE = 5
# At most this many webhook deliveries run at once (the mapping's ScalingConfig).
WEBHOOK_MAX_CONCURRENCY = 10
EVENT_BUS = "default"
# Delivery attempts and the notification marks (jobs table): a stream batch's marks are
# read and written together (BatchGetItem, BatchWriteItem).
JOBS_DELIVERIES = ("GetItem", "PutItem", "Query", "BatchGetItem", "BatchWriteItem")
SECRETS_SIGN = ("secretsmanager:GetSecretValue", "secretsmanager:CreateSecret")
SECRETS_MANAGE = (*SECRETS_SIGN, "secretsmanager:PutSecretValue")


class Notifications(Construct):
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
    ) -> None:
        super().__init__(scope, construct_id)
        assert WEBHOOK_QUEUE.visibility_timeout_s == sqs_visibility_for(TIMEOUT_S), (
            "pagefleet.specs.resources.WEBHOOK_QUEUE's visibility must be 6 x the sender's timeout"
        )
        self.dlq = sqs.Queue(
            self,
            "WebhooksDlq",
            retention_period=Duration.seconds(WEBHOOK_QUEUE.dlq_retention_s),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(self.dlq, "SQS3", "This queue is the webhook queue's DLQ (alarmed).")
        self.queue = sqs.Queue(
            self,
            "Webhooks",
            visibility_timeout=Duration.seconds(WEBHOOK_QUEUE.visibility_timeout_s),
            retention_period=Duration.seconds(WEBHOOK_QUEUE.retention_s),
            receive_message_wait_time=Duration.seconds(WEBHOOK_QUEUE.receive_wait_s),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=WEBHOOK_QUEUE.max_receive_count
            ),
        )
        self.secrets_arn = Stack.of(self).format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"pagefleet-webhooks/{config.stage}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

        self.function = functions.function(
            "webhooks",
            settings_cls=WebhookSettings,
            description="pagefleet webhooks: signed POSTs of finished jobs, retried with backoff",
            timeout_seconds=TIMEOUT_S,
            env={
                "jobs_table": store.jobs.table_name,
                "queue_url": self.queue.queue_url,
                "stage": config.stage,
            },
        )
        grants.table(self.function, store.jobs, ("PutItem",))
        # The event source grants receive / delete; a failed POST hides its message itself.
        grants.queue(self.function, self.queue, ("ChangeMessageVisibility",))
        self._secrets(self.function, SECRETS_SIGN)
        self.function.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=BATCH_SIZE,
                report_batch_item_failures=True,
                # Deliveries to tenants' endpoints at most this many at once: a burst of
                # events waits in the queue rather than taking the account's concurrency.
                max_concurrency=WEBHOOK_MAX_CONCURRENCY,
            )
        )

        # The stream reader queues webhooks and puts events; the API shows deliveries,
        # keeps the tenant's default webhook and hands out the signing secret.
        add_env(
            changes_function,
            ChangesSettings,
            webhook_queue_url=self.queue.queue_url,
            event_bus_name=EVENT_BUS,
        )
        grants.queue(changes_function, self.queue, grants.QUEUE_SEND)
        grants.table(changes_function, store.jobs, JOBS_DELIVERIES)
        grants.table(changes_function, store.tenants, ("GetItem",))
        changes_function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["events:PutEvents"],
                resources=[
                    Stack.of(self).format_arn(
                        service="events", resource="event-bus", resource_name=EVENT_BUS
                    )
                ],
            )
        )
        grants.table(api_function, store.tenants, ("PutItem", "DeleteItem"))
        self._secrets(api_function, SECRETS_MANAGE)

    def _secrets(self, function: lambda_.Function, actions: tuple[str, ...]) -> None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=list(actions), resources=[self.secrets_arn])
        )
        role = function.role
        assert role is not None
        acknowledge(
            role,
            f"IAM5[Resource::{resource_text(self, self.secrets_arn)}]",
            "One signing secret per tenant, created on first use: the tenant's name is only "
            "known per request; the prefix pagefleet-webhooks/<stage>/ bounds it.",
        )
