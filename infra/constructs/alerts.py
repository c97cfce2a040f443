"""Alerts: the SNS topic every alarm notifies (encrypted, TLS only, optional e-mail).

A stage that requires a subscriber (prod) and has no ``alarm_email`` gets a synth warning:
its alarms would fire to nobody.

Every alarm goes through ``notify`` with the anchor of its entry in ``docs/runbooks.md``
(what it means, how to look, what to do); an infra test checks that each alarm notifies the
topic and that its runbook entry exists.
"""

from __future__ import annotations

from aws_cdk import Annotations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

RUNBOOK = "docs/runbooks.md"
NO_SUBSCRIBER_WARNING = "pagefleet:alarmsNotifyNobody"


def runbook_link(anchor: str) -> str:
    return f"Runbook: {RUNBOOK}#{anchor}"


class Alerts(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        email: str | None,
        subscriber_required: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        # CloudWatch cannot publish to a topic under the AWS-managed aws/sns key, so the
        # topic gets its own key that lets CloudWatch use it.
        self.key = kms.Key(
            self, "TopicKey", enable_key_rotation=True, description="pagefleet alarm topic"
        )
        self.key.grant_encrypt_decrypt(iam.ServicePrincipal("cloudwatch.amazonaws.com"))
        self.topic = sns.Topic(
            self, "Topic", display_name="pagefleet alarms", master_key=self.key, enforce_ssl=True
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        elif subscriber_required:
            Annotations.of(self).add_warning_v2(
                NO_SUBSCRIBER_WARNING,
                "No alarm_email: every alarm of this stage notifies a topic nobody is "
                "subscribed to. Set alarm_email for the stage in pagefleet.deploy.json "
                "(docs/deploy.md), or, if you subscribe AlarmTopicArn outside the stack, "
                "set alarm_subscriber_required to false there.",
            )
        self._action = cw_actions.SnsAction(self.topic)
        self.alarms: list[cloudwatch.Alarm] = []
        # Dead-letter queues that no redrive policy names (e.g. a Scheduler target's or a
        # Lambda destination's): register them so the alarms construct watches them too.
        self.extra_dead_letter_queues: dict[str, sqs.IQueue] = {}

    def notify(self, alarm: cloudwatch.Alarm, *, runbook: str) -> cloudwatch.Alarm:
        """Send the alarm and its recovery to the topic; its description links the runbook."""
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        cfn = alarm.node.default_child
        assert isinstance(cfn, cloudwatch.CfnAlarm)
        cfn.alarm_description = f"{cfn.alarm_description or alarm.node.id}. {runbook_link(runbook)}"
        self.alarms.append(alarm)
        return alarm

    def dead_letter_queue(self, scope: Construct, construct_id: str, name: str) -> sqs.Queue:
        """A DLQ that no queue's redrive names (a Scheduler target's, a stream's on-failure
        destination): encrypted, TLS only, kept 14 days, and alarmed like every other DLQ."""
        from aws_cdk import Duration

        from infra.nag import acknowledge

        queue = sqs.Queue(
            scope,
            construct_id,
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(queue, "SQS3", "This queue is itself a dead-letter queue, alarmed.")
        self.watch_dead_letter_queue(name, queue)
        return queue

    def watch_dead_letter_queue(self, name: str, queue: sqs.IQueue) -> None:
        """Alarm on ``queue`` as a DLQ (for DLQs that are not a queue's redrive target)."""
        self.extra_dead_letter_queues[name] = queue
