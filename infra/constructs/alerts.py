"""Alerts: the SNS topic every alarm notifies (encrypted, TLS only, optional e-mail)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


class Alerts(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, email: str | None) -> None:
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
        self._action = cw_actions.SnsAction(self.topic)

    def notify(self, alarm: cloudwatch.Alarm) -> cloudwatch.Alarm:
        """Send the alarm and its recovery to the topic."""
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        return alarm
