"""The exact data-plane actions each runtime uses, granted on named resources only.

Listing actions (instead of ``grant_read_write_data``-style helpers) keeps each role to what
the code calls; an infra test asserts no role holds a wildcard action.
"""

from __future__ import annotations

from aws_cdk import CfnElement, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

from infra.nag import acknowledge, resource_text

# Conditional writes and transactions are authorized per item action (there is no
# separate IAM action for TransactWriteItems).
JOBS_API = ("GetItem", "PutItem", "UpdateItem", "Query", "ConditionCheckItem")
# BatchGetItem: an origin's two circuit breakers in one read (the same items GetItem reads).
JOBS_WORKER = (
    "GetItem",
    "BatchGetItem",
    "PutItem",
    "UpdateItem",
    "Query",
    "BatchWriteItem",
    "ConditionCheckItem",
)
JOBS_SWEEPER = ("GetItem", "UpdateItem", "Query", "ConditionCheckItem")
JOBS_DEAD_LETTERS = ("GetItem", "UpdateItem", "ConditionCheckItem")
# The scheduler function: submits jobs (records, idempotency keys, runs) like the API.
JOBS_SCHEDULER = JOBS_API
# The jobs stream's reader: reads jobs, releases or cancels dependants (conditional writes).
JOBS_CHANGES = ("GetItem", "UpdateItem", "Query", "ConditionCheckItem")
TENANTS_READ = ("GetItem", "Query")
TENANTS_QUOTA = ("GetItem", "Query", "UpdateItem")

QUEUE_SEND = ("SendMessage", "GetQueueAttributes")
QUEUE_CONSUME = (
    "ReceiveMessage",
    "DeleteMessage",
    "ChangeMessageVisibility",
    "GetQueueAttributes",
    # Retries go back on the worker's own queue with a delay.
    "SendMessage",
)


def table(principal: iam.IGrantable, target: dynamodb.ITable, actions: tuple[str, ...]) -> None:
    """Grant ``dynamodb:<action>`` on the table and its indexes."""
    target.grant(principal, *(f"dynamodb:{a}" for a in actions))
    acknowledge(
        _role(principal),
        f"IAM5[Resource::{resource_text(target, f'{target.table_arn}/index/*')}]",
        "Queries go through the table's own GSIs: '/index/*' under one named table.",
    )


def queue(principal: iam.IGrantable, target: sqs.IQueue, actions: tuple[str, ...]) -> None:
    target.grant(principal, *(f"sqs:{a}" for a in actions))


def objects(
    principal: iam.IGrantable, bucket: s3.IBucket, actions: tuple[str, ...], prefix: str = "*"
) -> None:
    """Grant ``s3:<action>`` on the bucket's objects (tenant isolation is by key, in code)."""
    principal.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[f"s3:{a}" for a in actions], resources=[bucket.arn_for_objects(prefix)]
        )
    )
    acknowledge(
        _role(principal),
        f"IAM5[Resource::<{logical_id(bucket)}.Arn>/{prefix}]",
        "Artifact keys begin with the tenant id, which only the code knows per request; "
        "tenant isolation is enforced in code (row-level), IAM bounds access to this bucket.",
    )


def logical_id(resource: IConstruct) -> str:
    """The CloudFormation logical id of an L2 resource (as cdk-nag names it)."""
    child = resource.node.default_child
    assert isinstance(child, CfnElement)
    stack = Stack.of(child)
    return str(stack.resolve(stack.get_logical_id(child)))


def _role(principal: iam.IGrantable) -> IConstruct:
    role = principal.grant_principal
    assert isinstance(role, iam.Role)
    return role
