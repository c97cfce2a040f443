"""Create pagefleet's tables, queues and bucket from pagefleet.specs.resources (local stack, tests).

The CDK constructs build from the same specs; tests/infra checks that both agree.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
from devstack.strict_aws import await_settled
from pagefleet.specs.resources import (
    ARTIFACTS_BUCKET,
    DEFAULT_POOLS,
    SCHEDULER,
    TABLES,
    WEBHOOK_QUEUE,
    QueueSpec,
    TableSpec,
    queues_of,
)


class QueuesNotSettled(RuntimeError):
    """A queue made here still did not answer: the embedded AWS is stuck or gone."""


@dataclass
class Provisioned:
    jobs_table: str
    tenants_table: str
    artifacts_bucket: str
    usage_table: str = ""
    queue_urls: dict[str, str] = field(default_factory=dict)
    dlq_urls: dict[str, str] = field(default_factory=dict)
    connections_table: str = ""
    webhook_queue_url: str = ""
    webhook_dlq_url: str = ""
    schedule_group: str | None = None
    scheduler_dlq_url: str | None = None
    scheduler_dlq_arn: str | None = None

    def queue_list(self) -> list[str]:
        """Every queue made: the job queues, their DLQs, the webhook pair, the Scheduler's DLQ."""
        return [
            *self.queue_urls.values(),
            *self.dlq_urls.values(),
            self.webhook_queue_url,
            self.webhook_dlq_url,
            *([self.scheduler_dlq_url] if self.scheduler_dlq_url else []),
        ]

    def await_queues(self, sqs: Any, *, timeout_s: float) -> None:
        """Return once every queue answers; QueuesNotSettled after ``timeout_s``."""
        if not await_settled(sqs, self.queue_list(), timeout_s=timeout_s):
            raise QueuesNotSettled(f"queues were not usable within {timeout_s} s")

    def store_settings(self) -> dict[str, Any]:
        """The data stores' names, as every function's and worker's settings take them."""
        return {
            "jobs_table": self.jobs_table,
            "tenants_table": self.tenants_table,
            "artifacts_bucket": self.artifacts_bucket,
            "usage_table": self.usage_table,
            "queue_urls": dict(self.queue_urls),
        }

    def scheduler_settings(self) -> dict[str, str]:
        """The API's EventBridge Scheduler settings (the local poller plays the Scheduler)."""
        if self.schedule_group is None:
            return {}
        prefix = f"arn:aws:{{}}:{LOCAL_REGION}:{LOCAL_ACCOUNT}"
        return {
            "schedule_group": self.schedule_group,
            "scheduler_target_arn": prefix.format("lambda") + ":function:pagefleet-scheduler",
            "scheduler_role_arn": prefix.format("iam").replace(LOCAL_REGION, "")
            + ":role/pagefleet-scheduler",
            "scheduler_dlq_arn": self.scheduler_dlq_arn or "",
        }


def _key_schema(pk: Any, sk: Any) -> list[dict[str, str]]:
    schema = [{"AttributeName": pk.name, "KeyType": "HASH"}]
    if sk is not None:
        schema.append({"AttributeName": sk.name, "KeyType": "RANGE"})
    return schema


def create_table(dynamodb: Any, spec: TableSpec, name: str) -> None:
    kwargs: dict[str, Any] = {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": spec.attribute_definitions(),
        "KeySchema": _key_schema(spec.partition_key, spec.sort_key),
    }
    if spec.indexes:
        kwargs["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index.name,
                "KeySchema": _key_schema(index.partition_key, index.sort_key),
                "Projection": {"ProjectionType": "ALL"},
            }
            for index in spec.indexes
        ]
    if spec.stream:
        kwargs["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
    try:
        dynamodb.create_table(**kwargs)
    except dynamodb.exceptions.ResourceInUseException:
        return
    if spec.ttl_attribute:
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute},
        )


def queue_arn(sqs: Any, url: str) -> str:
    """A queue's ARN from its URL (``.../<account>/<name>``), without a call: a queue is not
    usable in the second after CreateQueue (devstack.strict_aws), and naming it needs none."""
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{sqs.meta.region_name}:{account}:{name}"


def create_queue(sqs: Any, queue: QueueSpec, prefix: str = "") -> tuple[str, str]:
    """The queue and its DLQ (redrive after ``max_receive_count``): their URLs."""
    dlq_url = sqs.create_queue(
        QueueName=prefix + queue.dlq_local_name,
        Attributes={"MessageRetentionPeriod": str(queue.dlq_retention_s)},
    )["QueueUrl"]
    dlq_arn = queue_arn(sqs, dlq_url)
    url = sqs.create_queue(
        QueueName=prefix + queue.local_name,
        Attributes={
            "VisibilityTimeout": str(queue.visibility_timeout_s),
            "MessageRetentionPeriod": str(queue.retention_s),
            "ReceiveMessageWaitTimeSeconds": str(queue.receive_wait_s),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(queue.max_receive_count)}
            ),
        },
    )["QueueUrl"]
    return url, dlq_url


def create_all(
    dynamodb: Any,
    sqs: Any,
    s3: Any,
    *,
    prefix: str = "",
    scheduler: Any | None = None,
    settle_timeout_s: float | None = 30,
    pools: Iterable[str] = DEFAULT_POOLS,
) -> Provisioned:
    """Idempotent: running it twice leaves one set of resources. With a ``scheduler``
    client, EventBridge Scheduler's schedule group and its target's DLQ too. ``pools``: the
    worker pools whose queues to make (each its three priorities and their DLQs).

    Returns once every queue is usable, as a deployed stack's are long before a job uses
    them (AWS: a new queue may not be usable for a second; the strict embedded AWS refuses
    it). ``settle_timeout_s=None`` returns at once, for a caller that waits later itself
    (``Provisioned.await_queues``)."""
    names = {spec.logical_id: prefix + spec.local_name for spec in TABLES}
    out = Provisioned(
        jobs_table=names["JobsTable"],
        tenants_table=names["TenantsTable"],
        usage_table=names["UsageTable"],
        artifacts_bucket=prefix + ARTIFACTS_BUCKET.local_name,
    )
    # The queues first: their first second (not usable yet) passes while the rest is made.
    for queue in queues_of(pools):
        out.queue_urls[queue.key], out.dlq_urls[queue.key] = create_queue(sqs, queue, prefix)
    out.webhook_queue_url, out.webhook_dlq_url = create_queue(sqs, WEBHOOK_QUEUE, prefix)
    if scheduler is not None:
        out.scheduler_dlq_url = sqs.create_queue(
            QueueName=prefix + SCHEDULER.dlq_local_name,
            Attributes={"MessageRetentionPeriod": str(SCHEDULER.dlq_retention_s)},
        )["QueueUrl"]
        out.scheduler_dlq_arn = queue_arn(sqs, out.scheduler_dlq_url)
        out.schedule_group = prefix + SCHEDULER.local_group
        with contextlib.suppress(scheduler.exceptions.ConflictException):
            scheduler.create_schedule_group(Name=out.schedule_group)

    for spec in TABLES:
        create_table(dynamodb, spec, names[spec.logical_id])
    out.connections_table = names["ConnectionsTable"]

    bucket = out.artifacts_bucket
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    rules: list[dict[str, Any]] = [
        {
            "ID": f"expire-{rule.retention_class}",
            "Status": "Enabled",
            "Filter": {
                "Tag": {"Key": ARTIFACTS_BUCKET.retention_tag, "Value": rule.retention_class}
            },
            "Expiration": {"Days": rule.expire_days},
        }
        for rule in ARTIFACTS_BUCKET.lifecycle
    ]
    rules.append(
        {
            "ID": "abort-incomplete-uploads",
            "Status": "Enabled",
            "Filter": {"Prefix": ""},
            "AbortIncompleteMultipartUpload": {
                "DaysAfterInitiation": ARTIFACTS_BUCKET.abort_incomplete_upload_days
            },
        }
    )
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    if settle_timeout_s is not None:
        out.await_queues(sqs, timeout_s=settle_timeout_s)
    return out
