"""The browser workers' network: a VPC whose worker subnets reach target sites either
through NAT gateways (``egress="nat"``, private subnets) or directly (``egress="public"``,
public IP, no inbound). AWS traffic avoids the NAT data-processing charge: gateway endpoints
for S3 and DynamoDB always, interface endpoints (SQS, ECR, Logs, Secrets Manager, STS) when
tasks are private."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
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


# A second CIDR block for the subnets of pools with their own egress address (fixed_ip):
# apart from the stage's own ranges (10.0.0.0/16, which its subnets fill), so adding such a
# pool leaves every existing subnet as it is.
POOL_CIDR = "10.1.0.0/16"


def fixed_ip_subnets(
    scope: Construct, vpc: ec2.Vpc, config: StageConfig
) -> dict[str, list[ec2.ISubnet]]:
    """Each fixed_ip pool's own private subnets (one per AZ), whose default route is the
    pool's own NAT gateway with its own Elastic IP: every task of the pool reaches sites
    from that one address (the stack output ``PoolEgressIp<Pool>``). The NAT gateway is in
    the first AZ's public subnet (one address means one gateway), as are S3 and DynamoDB's
    gateway endpoints for the pool's route tables. A pool keeps its range by its place
    among the fixed_ip pools (new ones are added after the stage's: merge by name)."""
    pools = config.fixed_ip_pools
    if not pools:
        return {}
    block = ec2.CfnVPCCidrBlock(scope, "PoolCidr", vpc_id=vpc.vpc_id, cidr_block=POOL_CIDR)
    public = vpc.public_subnets[0]
    out: dict[str, list[ec2.ISubnet]] = {}
    for index, name in enumerate(pools):
        pool_id = name.capitalize()
        address = ec2.CfnEIP(scope, f"{pool_id}EgressIp", domain="vpc")
        nat = ec2.CfnNatGateway(
            scope,
            f"{pool_id}Nat",
            subnet_id=public.subnet_id,
            allocation_id=address.attr_allocation_id,
        )
        nat.node.add_dependency(public.internet_connectivity_established)
        subnets: list[ec2.ISubnet] = []
        for zone, availability_zone in enumerate(vpc.availability_zones):
            subnet = ec2.PrivateSubnet(
                scope,
                f"{pool_id}Subnet{zone + 1}",
                vpc_id=vpc.vpc_id,
                availability_zone=availability_zone,
                cidr_block=f"10.1.{index * 16 + zone}.0/24",
                map_public_ip_on_launch=False,
            )
            subnet.node.add_dependency(block)
            subnet.add_route(
                "Egress",
                router_id=nat.ref,
                router_type=ec2.RouterType.NAT_GATEWAY,
                destination_cidr_block="0.0.0.0/0",
                enables_internet_connectivity=True,
            )
            subnets.append(subnet)
        mine = [ec2.SubnetSelection(subnets=subnets)]
        vpc.add_gateway_endpoint(
            f"{pool_id}S3", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=mine
        )
        vpc.add_gateway_endpoint(
            f"{pool_id}DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB, subnets=mine
        )
        CfnOutput(
            Stack.of(scope),  # at the stack's top: the output is named PoolEgressIp<Pool>
            f"PoolEgressIp{pool_id}",
            value=address.ref,
            description=f"The one address pool {name}'s tasks reach sites from (fixed_ip)",
        )
        out[name] = subnets
    return out


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
