"""Tenants kept apart below the code: the per-tenant job role, and what tenancy grants.

The worker assumes the job role for each job with the session tag ``tenant=<id>``
(``browser_task/tenant/access.py``); every permission of the role is bounded by that tag:

- S3 objects only under ``<tenant>/`` (the tenant's artifacts and saved sessions), and
  listing only that prefix: without ``s3:ListBucket`` S3 answers a missing key (a session
  never saved) 403 AccessDenied instead of 404,
- the usage table only on items whose partition key is ``TENANT#<tenant>``
  (``dynamodb:LeadingKeys``),
- Secrets Manager only under ``pagefleet/<stage>/<tenant>/``,
- the jobs table only on the tenant's browser-session commands (partition
  ``SCMD#<tenant>``: steps, extracted data, page snapshots), which the task roles are
  explicitly denied (they reach the tenant's job items in the same table).

The role trusts only the worker task roles, and only with that one tag set; the task roles
themselves can read no artifact, session or secret at all. So a bug in the worker cannot
reach another tenant's data: IAM refuses it. Beside it, the tenancy grants of the Lambda
functions (limits and counters, usage, deletion) and an alarm on tenants refused by their
limits at a rate that says something is wrong.
"""

from __future__ import annotations

import jsii
from aws_cdk import ArnFormat, Duration, IStableListProducer, Lazy, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import grants
from infra.nag import acknowledge, resource_text
from pagefleet.specs.metrics_names import API_SERVICE, TENANT_REFUSALS, stage_namespace
from pagefleet.specs.resources import SESSION_LEDGER_PK_PREFIX, TENANT_SESSION_TAG

from .alerts import Alerts
from .artifacts import ArtifactsBucket
from .job_store import JobStore

# The job's tenant, as IAM reads it from the session tag.
TENANT = f"${{aws:PrincipalTag/{TENANT_SESSION_TAG}}}"
NAG_TENANT = f"<aws:PrincipalTag/{TENANT_SESSION_TAG}>"
USAGE_WRITE = ("GetItem", "PutItem", "UpdateItem", "ConditionCheckItem", "Query")
# A session's command ledger, as the worker uses it (claim, finish, expire, the pending ones).
LEDGER_ITEMS = ("GetItem", "PutItem", "UpdateItem", "Query")
# Every item action a task role's jobs-table grant could reach a ledger item with.
ITEM_ACTIONS = (
    "GetItem",
    "BatchGetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchWriteItem",
    "ConditionCheckItem",
)
# Limits, counters and audit records in the tenants table, by runtime.
TENANTS_API = ("GetItem", "PutItem", "UpdateItem", "Query", "BatchGetItem")
TENANTS_MOVES = ("GetItem", "UpdateItem")
# The sweeper also reads every tenant's running set (a Scan) for slots ended jobs left behind.
TENANTS_SWEEP = (*TENANTS_MOVES, "Scan")
USAGE_READ = ("GetItem", "Query")
# Deleting a job's record and what is kept under it (and expiring it).
JOBS_ERASE = ("DeleteItem", "BatchWriteItem", "UpdateItem", "Query")


@jsii.implements(IStableListProducer)
class _RoleArns:
    """The trusted task roles' ARNs, read at synth (the roles are made after the job role)."""

    def __init__(self, roles: list[iam.IRole]) -> None:
        self._roles = roles

    def produce(self) -> list[str]:
        return [role.role_arn for role in self._roles]


class TenantIsolation(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        store: JobStore,
        artifacts: ArtifactsBucket,
        alerts: Alerts,
        refusals_alarm_count: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self._store = store
        self._artifacts = artifacts
        self._trusted: list[iam.IRole] = []
        stack = Stack.of(self)
        trust = iam.PrincipalWithConditions(
            iam.AccountRootPrincipal(),
            {
                # Only the worker task roles (added by ``trust``), and only with the tag set,
                # no other tag beside it.
                "ArnEquals": {"aws:PrincipalArn": Lazy.list(_RoleArns(self._trusted))},
                "StringLike": {f"aws:RequestTag/{TENANT_SESSION_TAG}": "?*"},
                "ForAllValues:StringEquals": {"aws:TagKeys": [TENANT_SESSION_TAG]},
            },
        )
        self.role = iam.Role(
            self,
            "JobRole",
            assumed_by=iam.SessionTagsPrincipal(trust),
            description="pagefleet job role: one tenant's data, chosen by the session tag",
            max_session_duration=Duration.hours(1),
        )
        objects = artifacts.bucket.arn_for_objects(f"{TENANT}/*")
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TenantObjects",
                actions=["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"],
                resources=[objects],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TenantListing",
                actions=["s3:ListBucket"],
                resources=[artifacts.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{TENANT}/*"]}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TenantUsageItems",
                actions=[f"dynamodb:{a}" for a in USAGE_WRITE],
                resources=[store.usage.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TENANT#{TENANT}"]}
                },
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TenantSessionCommands",
                actions=[f"dynamodb:{a}" for a in LEDGER_ITEMS],
                resources=[store.jobs.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {
                        "dynamodb:LeadingKeys": [f"{SESSION_LEDGER_PK_PREFIX}{TENANT}"]
                    }
                },
            )
        )
        secrets = stack.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"pagefleet/{stage}/{TENANT}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TenantSecrets", actions=["secretsmanager:GetSecretValue"], resources=[secrets]
            )
        )
        for resource in (objects, secrets):
            acknowledge(
                self.role,
                # cdk-nag spells the policy variable as it spells a reference: <...>.
                f"IAM5[Resource::{resource_text(self, resource).replace(TENANT, NAG_TENANT)}]",
                "One tenant's prefix, named by the session tag (aws:PrincipalTag/tenant) the "
                "worker sets per job: the wildcard is that tenant's objects or secrets only.",
            )
        self.refusals_alarm = alerts.notify(
            cw.Alarm(
                self,
                "TenantRefusalsAlarm",
                alarm_description=(
                    "Submissions refused by tenant limits (rate, queued jobs) passed "
                    f"{refusals_alarm_count} in 5 minutes for 3 periods: a client retrying "
                    "without backing off, or limits set too low"
                ),
                metric=cw.Metric(
                    namespace=stage_namespace(stage),
                    metric_name=TENANT_REFUSALS,
                    dimensions_map={"service": API_SERVICE},
                    statistic="Sum",
                    period=Duration.minutes(5),
                ),
                threshold=refusals_alarm_count,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=3,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            runbook="tenant-refusals",
        )

    def trust(self, task_role: iam.Role) -> None:
        """Let a worker task role assume the job role (tagged) — and nothing else do so."""
        self._trusted.append(task_role)
        # The tenant's session commands are the job role's alone: the task role's grant on
        # the jobs table (its jobs' items) never reaches them, whatever it asks.
        task_role.add_to_policy(
            iam.PolicyStatement(
                sid="NoSessionCommands",
                effect=iam.Effect.DENY,
                actions=[f"dynamodb:{a}" for a in ITEM_ACTIONS],
                resources=[self._store.jobs.table_arn, f"{self._store.jobs.table_arn}/index/*"],
                conditions={
                    "ForAnyValue:StringLike": {
                        "dynamodb:LeadingKeys": [f"{SESSION_LEDGER_PK_PREFIX}*"]
                    }
                },
            )
        )
        # A tenant's counters in one read (the deferral of a backlog spreads by its size).
        grants.table(task_role, self._store.tenants, ("BatchGetItem",))
        task_role.add_to_policy(
            iam.PolicyStatement(
                actions=["sts:AssumeRole", "sts:TagSession"], resources=[self.role.role_arn]
            )
        )

    def grant_functions(self, functions: dict[str, lambda_.Function]) -> None:
        """What tenancy needs of each Lambda function: limits and counters (API, and every
        function that moves jobs), usage (API), and deleting a job's data (API, and the jobs
        stream reader, which finishes deletions and writes expiries)."""
        store, bucket = self._store, self._artifacts.bucket
        for name, function in functions.items():
            if name == "api":
                grants.table(function, store.tenants, TENANTS_API)
                grants.table(function, store.usage, USAGE_READ)
            elif name == "sweeper":
                grants.table(function, store.tenants, TENANTS_SWEEP)
            elif name in ("dead_letters", "job_changes", "scheduler"):
                grants.table(function, store.tenants, TENANTS_MOVES)
            if name in ("api", "job_changes"):
                grants.table(function, store.jobs, JOBS_ERASE)
                function.add_to_role_policy(  # lists a job's (or the sessions') prefix
                    iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])
                )
                grants.objects(function, bucket, ("DeleteObject",))
