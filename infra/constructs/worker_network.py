"""The browser workers' network: a VPC whose worker subnets reach target sites either
through NAT gateways (``egress="nat"``, private subnets) or directly (``egress="public"``,
public IP, no inbound). AWS traffic avoids the NAT data-processing charge: gateway endpoints
for S3 and DynamoDB always, interface endpoints (SQS, ECR, Logs, Secrets Manager, STS) when
tasks are private."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig


def worker_vpc(scope: Construct, config: StageConfig) -> ec2.Vpc:
    private = config.egress == "nat"
    subnets = [ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)]
    if private:
        subnets.append(
            ec2.SubnetConfiguration(name="workers", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        )
    flow_logs = logs.LogGroup(scope, "FlowLogs", retention=config.log_retention)
    vpc = ec2.Vpc(
        scope,
        "Vpc",
        max_azs=config.max_azs,
        nat_gateways=config.nat_gateways if private else 0,
        subnet_configuration=subnets,
        gateway_endpoints={
            "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
            "DynamoDb": ec2.GatewayVpcEndpointOptions(
                service=ec2.GatewayVpcEndpointAwsService.DYNAMODB
            ),
        },
        flow_logs={
            "All": ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                traffic_type=ec2.FlowLogTrafficType.ALL,
            )
        },
    )
    return vpc


def interface_endpoints(
    scope: Construct, vpc: ec2.Vpc, clients: ec2.ISecurityGroup
) -> ec2.SecurityGroup:
    """Private DNS endpoints for the AWS APIs the tasks call, reachable from the workers'
    security group only (not the whole VPC CIDR: nothing else in it needs them)."""
    endpoint_security_group = ec2.SecurityGroup(
        scope,
        "EndpointSecurityGroup",
        vpc=vpc,
        description="pagefleet interface endpoints: HTTPS from the browser workers only",
        allow_all_outbound=False,
    )
    endpoint_security_group.add_ingress_rule(
        clients, ec2.Port.tcp(443), "HTTPS from the browser workers"
    )
    for endpoint_id, service in {
        "Sqs": ec2.InterfaceVpcEndpointAwsService.SQS,
        "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
        "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
        "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
        "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
        "Sts": ec2.InterfaceVpcEndpointAwsService.STS,  # the job role, per tenant
    }.items():
        vpc.add_interface_endpoint(
            endpoint_id,
            service=service,
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            private_dns_enabled=True,
            open=False,
            security_groups=[endpoint_security_group],
        )
    return endpoint_security_group
