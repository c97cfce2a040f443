"""Job store: the DynamoDB tables, built from ``pagefleet.specs.resources`` table specs."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from pagefleet.specs.resources import JOBS_TABLE, TENANTS_TABLE, USAGE_TABLE, KeyAttr, TableSpec

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


def restored_table(scope: Construct, spec: TableSpec, name: str) -> dynamodb.ITable:
    """A table restored outside the stack (PITR or AWS Backup; scripts/restore_table.py),
    used in place of the stack's own: see docs/runbooks.md, "Restore a table"."""
    return dynamodb.Table.from_table_attributes(
        scope, spec.logical_id, table_name=name, global_indexes=[i.name for i in spec.indexes]
    )


class JobStore(Construct):
    """Jobs (records, attempts, events, idempotency keys), tenants (hashed API keys, limits,
    counters, audit records) and usage (per attempt, per tenant and day).

    ``restored`` maps a table's logical id to the name of a restored table to use instead:
    the stack's own table then leaves the template (kept by its retain policy, in prod).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retain: bool,
        restored: dict[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        restored = restored or {}

        def table(spec: TableSpec) -> dynamodb.ITable:
            if spec.logical_id in restored:
                return restored_table(self, spec, restored[spec.logical_id])
            return build_table(self, spec, retain=retain)

        self.jobs = table(JOBS_TABLE)
        self.tenants = table(TENANTS_TABLE)
        self.usage = table(USAGE_TABLE)
