"""Job store: the DynamoDB tables, built from ``pagefleet.resources`` table specs."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from pagefleet.resources import JOBS_TABLE, TENANTS_TABLE, KeyAttr, TableSpec

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


def _attr(key: KeyAttr) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_TYPES[key.type])


def build_table(scope: Construct, spec: TableSpec, *, retain: bool) -> dynamodb.Table:
    """One on-demand table with PITR, exactly as ``spec`` describes it."""
    table = dynamodb.Table(
        scope,
        spec.logical_id,
        partition_key=_attr(spec.partition_key),
        sort_key=_attr(spec.sort_key) if spec.sort_key else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        time_to_live_attribute=spec.ttl_attribute,
        # Job events for the live function; the same view type as the local stack.
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if spec.stream else None,
        deletion_protection=retain,
        removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
    )
    for index in spec.indexes:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=_attr(index.partition_key),
            sort_key=_attr(index.sort_key) if index.sort_key else None,
            projection_type=dynamodb.ProjectionType.ALL,
        )
    return table


class JobStore(Construct):
    """Jobs (records, attempts, events, idempotency keys) and tenants (hashed API keys)."""

    def __init__(self, scope: Construct, construct_id: str, *, retain: bool) -> None:
        super().__init__(scope, construct_id)
        self.jobs = build_table(self, JOBS_TABLE, retain=retain)
        self.tenants = build_table(self, TENANTS_TABLE, retain=retain)
