"""API Gateway's account-wide logging role, and what every API stage that logs waits for.

API Gateway writes a REST or WebSocket stage's execution and access logs with the CloudWatch
Logs role of its account settings (``AWS::ApiGateway::Account``: one setting per account and
region). A stage that turns logging on before the setting exists fails to create ("CloudWatch
Logs role ARN must be set in account settings") and the stack rolls back.

``api_gateway_account`` (stage config) says who owns the setting:

- ``"stack"``: this stack makes the role and the setting, and every stage that logs depends on
  it, so a fresh account or region deploys in one go. The setting is the account's: the last
  stack to deploy one wins. The role is kept when the stack goes, so the setting never points
  at a deleted role.
- ``"existing"``: someone else owns it (another stack, an operator); this stack leaves it
  alone and its stages log through the role already set. Check it before deploying:
  ``aws apigateway get-account --query cloudwatchRoleArn``.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from infra.config import StageConfig
from infra.nag import acknowledge


class ApiGatewayAccount(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.account: apigw.CfnAccount | None = None
        if config.api_gateway_account != "stack":
            return
        self.role = iam.Role(
            self,
            "CloudWatchRole",
            assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
            description="API Gateway's account-wide role for writing API logs to CloudWatch",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    "service-role/AmazonAPIGatewayPushToCloudWatchLogs"
                )
            ],
        )
        self.role.apply_removal_policy(RemovalPolicy.RETAIN)
        self.account = apigw.CfnAccount(self, "Account", cloud_watch_role_arn=self.role.role_arn)
        acknowledge(
            self.role,
            "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level logging role, the AWS-documented managed policy.",
        )

    def logs_through(self, stage: IConstruct) -> None:
        """``stage`` logs with the account's role: it is created after the setting."""
        if self.account is not None:
            stage.node.add_dependency(self.account)
