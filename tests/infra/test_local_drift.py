"""The local stack's tables, queues and bucket equal the synthesized template's.

Both are built from pagefleet.specs.resources; this catches either side interpreting a spec
differently (keys, GSIs, TTL, streams, redrive, visibility, lifecycle).
"""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from devstack.provision import create_all
from pagefleet.specs.resources import DEFAULT_POOLS, WEBHOOK_QUEUE, queues_of

from .helpers import logical_id

QUEUES = queues_of(DEFAULT_POOLS)  # the stages' pools

pytestmark = [pytest.mark.infra, pytest.mark.slow]


@pytest.fixture(scope="module")
def local():  # type: ignore[no-untyped-def]
    with mock_aws():
        region = "us-east-1"
        dynamodb = boto3.client("dynamodb", region_name=region)
        sqs = boto3.client("sqs", region_name=region)
        s3 = boto3.client("s3", region_name=region)
        provisioned = create_all(dynamodb, sqs, s3)
        tables = {
            "jobs": dynamodb.describe_table(TableName=provisioned.jobs_table)["Table"],
            "tenants": dynamodb.describe_table(TableName=provisioned.tenants_table)["Table"],
            "usage": dynamodb.describe_table(TableName=provisioned.usage_table)["Table"],
            "connections": dynamodb.describe_table(TableName=provisioned.connections_table)[
                "Table"
            ],
        }
        ttl = {
            name: dynamodb.describe_time_to_live(TableName=t["TableName"])["TimeToLiveDescription"]
            for name, t in tables.items()
        }
        queues = {
            pool: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            for pool, url in provisioned.queue_urls.items()
        }
        dlqs = {
            pool: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            for pool, url in provisioned.dlq_urls.items()
        }
        queues[WEBHOOK_QUEUE.key] = sqs.get_queue_attributes(
            QueueUrl=provisioned.webhook_queue_url, AttributeNames=["All"]
        )["Attributes"]
        dlqs[WEBHOOK_QUEUE.key] = sqs.get_queue_attributes(
            QueueUrl=provisioned.webhook_dlq_url, AttributeNames=["All"]
        )["Attributes"]
        lifecycle = s3.get_bucket_lifecycle_configuration(Bucket=provisioned.artifacts_bucket)
        yield {
            "tables": tables,
            "ttl": ttl,
            "queues": queues,
            "dlqs": dlqs,
            "lifecycle": lifecycle["Rules"],
        }


def _gsis(indexes):  # type: ignore[no-untyped-def]
    return {
        i["IndexName"]: (i["KeySchema"], i["Projection"]["ProjectionType"]) for i in indexes or []
    }


@pytest.mark.parametrize("name", ["jobs", "tenants", "usage", "connections"])
def test_tables_match(synth, local, name) -> None:
    table = (
        synth.stack.live.connections if name == "connections" else getattr(synth.stack.store, name)
    )
    cfn = synth.raw["Resources"][logical_id(table)]["Properties"]
    described = local["tables"][name]
    assert described["KeySchema"] == cfn["KeySchema"]
    assert sorted(described["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        cfn["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    assert _gsis(described.get("GlobalSecondaryIndexes")) == _gsis(
        cfn.get("GlobalSecondaryIndexes")
    )
    assert described["BillingModeSummary"]["BillingMode"] == cfn["BillingMode"]
    local_stream = described.get("StreamSpecification", {})
    cfn_stream = cfn.get("StreamSpecification", {})
    assert local_stream.get("StreamViewType") == cfn_stream.get("StreamViewType")
    ttl = local["ttl"][name]
    if "TimeToLiveSpecification" in cfn:
        assert ttl["TimeToLiveStatus"] == "ENABLED"
        assert ttl["AttributeName"] == cfn["TimeToLiveSpecification"]["AttributeName"]
    else:
        assert ttl["TimeToLiveStatus"] == "DISABLED"


@pytest.mark.parametrize("spec", [*QUEUES, WEBHOOK_QUEUE], ids=lambda s: s.key)
def test_queues_match(synth, local, spec) -> None:
    if spec is WEBHOOK_QUEUE:
        queue, dlq = synth.stack.notifications.queue, synth.stack.notifications.dlq
    else:
        pool = next(q for q in synth.stack.queues.all if q.key == spec.key)
        queue, dlq = pool.queue, pool.dlq
    cfn = synth.raw["Resources"][logical_id(queue)]["Properties"]
    cfn_dlq = synth.raw["Resources"][logical_id(dlq)]["Properties"]
    attributes = local["queues"][spec.key]
    assert int(attributes["VisibilityTimeout"]) == cfn["VisibilityTimeout"]
    assert int(attributes["MessageRetentionPeriod"]) == cfn["MessageRetentionPeriod"]
    assert int(attributes["ReceiveMessageWaitTimeSeconds"]) == cfn["ReceiveMessageWaitTimeSeconds"]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == cfn["RedrivePolicy"]["maxReceiveCount"]
    assert redrive["deadLetterTargetArn"] == local["dlqs"][spec.key]["QueueArn"]
    assert (
        int(local["dlqs"][spec.key]["MessageRetentionPeriod"]) == cfn_dlq["MessageRetentionPeriod"]
    )


def test_bucket_lifecycle_matches(synth, local) -> None:
    cfn = synth.raw["Resources"][logical_id(synth.stack.artifacts.bucket)]["Properties"]
    cfn_rules = {r["Id"]: r for r in cfn["LifecycleConfiguration"]["Rules"]}
    local_rules = {r["ID"]: r for r in local["lifecycle"]}
    assert set(local_rules) == set(cfn_rules)
    for rule_id, rule in local_rules.items():
        cfn_rule = cfn_rules[rule_id]
        if "Expiration" in rule:
            assert rule["Expiration"]["Days"] == cfn_rule["ExpirationInDays"]
            tag = rule["Filter"]["Tag"]
            assert [{"Key": tag["Key"], "Value": tag["Value"]}] == cfn_rule["TagFilters"]
        if "AbortIncompleteMultipartUpload" in rule:
            assert (
                rule["AbortIncompleteMultipartUpload"] == cfn_rule["AbortIncompleteMultipartUpload"]
            )
