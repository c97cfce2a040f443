"""Backups: an AWS Backup plan for the tables, beside their point-in-time recovery.

PITR restores any second of the last 35 days but lives and dies with the table's account
and settings; the daily AWS Backup recovery points sit in their own vault, survive a
deleted table, and are what a restore drill starts from when PITR cannot help (see
docs/runbooks.md, "Restore a table"). A failed, aborted or expired backup job alarms.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_backup as backup
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import acknowledge

from .alarms import events_log_group, log_group_target_arn, rule_matches
from .alerts import Alerts

# 03:00 UTC, a quiet hour for most tenants; a job may start within the hour.
DAILY = events.Schedule.cron(hour="3", minute="0")
FAILED_STATES = ["FAILED", "ABORTED", "EXPIRED"]


class Backups(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        tables: list[dynamodb.ITable],
        retention_days: int,
        retain: bool,
        alerts: Alerts,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        self.vault = backup.BackupVault(
            self,
            "Vault",
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        )
        self.plan = backup.BackupPlan(self, "Plan", backup_vault=self.vault)
        self.plan.add_rule(
            backup.BackupPlanRule(
                rule_name="daily",
                schedule_expression=DAILY,
                start_window=Duration.hours(1),
                completion_window=Duration.hours(8),
                delete_after=Duration.days(retention_days),
            )
        )
        self.selection = self.plan.add_selection(
            "Tables", resources=[backup.BackupResource.from_dynamo_db_table(t) for t in tables]
        )
        acknowledge(
            self.selection,
            "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSBackupServiceRolePolicyForBackup]",
            "AWS Backup's own service-role policy for taking backups, scoped by the selection.",
        )

        failures = events_log_group(self, "FailedJobs", retention=log_retention)
        rule = events.CfnRule(
            self,
            "FailedJobsRule",
            description="pagefleet: AWS Backup jobs of the tables that did not complete",
            event_pattern={
                "source": ["aws.backup"],
                "detail-type": ["Backup Job State Change"],
                "detail": {
                    "backupVaultName": [self.vault.backup_vault_name],
                    "state": FAILED_STATES,
                },
            },
            targets=[
                events.CfnRule.TargetProperty(
                    id="FailedJobsLog", arn=log_group_target_arn(failures)
                )
            ],
        )
        self.alarm = alerts.notify(
            cw.Alarm(
                self,
                "FailedAlarm",
                alarm_description="A daily backup of the pagefleet tables failed",
                metric=rule_matches(rule, period=Duration.hours(1)),
                threshold=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            runbook="backup-failed",
        )
