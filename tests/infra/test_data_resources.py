"""Job store, queues and artifacts bucket: built from pagefleet.specs.resources, as specified."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from pagefleet.specs.resources import ARTIFACTS_BUCKET, DEFAULT_POOLS, TABLES, queues_of

from .helpers import logical_id

QUEUES = queues_of(DEFAULT_POOLS)  # the stages' pools

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def _key_schema(pk, sk):  # type: ignore[no-untyped-def]
    schema = [{"AttributeName": pk.name, "KeyType": "HASH"}]
    if sk is not None:
        schema.append({"AttributeName": sk.name, "KeyType": "RANGE"})
    return schema


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.logical_id)
def test_table_matches_its_spec(synth, spec) -> None:
    table = {
        "JobsTable": synth.stack.store.jobs,
        "TenantsTable": synth.stack.store.tenants,
        "UsageTable": synth.stack.store.usage,
        "ConnectionsTable": synth.stack.live.connections,
    }[spec.logical_id]
    props = synth.raw["Resources"][logical_id(table)]["Properties"]
    assert props["KeySchema"] == _key_schema(spec.partition_key, spec.sort_key)
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == (
        spec.attribute_definitions()
    )
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    indexes = {i["IndexName"]: i for i in props.get("GlobalSecondaryIndexes", [])}
    assert set(indexes) == {i.name for i in spec.indexes}
    for index in spec.indexes:
        assert indexes[index.name]["KeySchema"] == _key_schema(index.partition_key, index.sort_key)
        assert indexes[index.name]["Projection"] == {"ProjectionType": "ALL"}
    if spec.ttl_attribute:
        assert props["TimeToLiveSpecification"] == {
            "AttributeName": spec.ttl_attribute,
            "Enabled": True,
        }
    else:
        assert "TimeToLiveSpecification" not in props
    assert ("StreamSpecification" in props) == spec.stream


def test_dev_destroys_data_prod_retains_it(synth) -> None:
    # The session synth is dev: tables and bucket go with the stack.
    for table in (synth.stack.store.jobs, synth.stack.store.tenants, synth.stack.store.usage):
        assert synth.raw["Resources"][logical_id(table)]["DeletionPolicy"] == "Delete"
    bucket = synth.raw["Resources"][logical_id(synth.stack.artifacts.bucket)]
    assert bucket["DeletionPolicy"] == "Delete"

    # prod: the same constructs in a small stack (no full second synth).
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from infra.config import STAGES
    from infra.constructs.artifacts import ArtifactsBucket
    from infra.constructs.job_store import JobStore

    assert STAGES["prod"].retain_data and not STAGES["dev"].retain_data
    stack = Stack(App(), "prod-data")
    JobStore(stack, "JobStore", retain=STAGES["prod"].retain_data)
    ArtifactsBucket(stack, "Artifacts", retain=STAGES["prod"].retain_data)
    template = Template.from_stack(stack)
    for cfn_type in ("AWS::DynamoDB::Table", "AWS::S3::Bucket"):
        for resource in template.find_resources(cfn_type).values():
            assert resource["DeletionPolicy"] == "Retain"
            assert resource["UpdateReplacePolicy"] == "Retain"
    template.all_resources_properties("AWS::DynamoDB::Table", {"DeletionProtectionEnabled": True})
    assert not template.find_resources("Custom::S3AutoDeleteObjects")


@pytest.mark.parametrize("spec", QUEUES, ids=lambda s: s.key)
def test_queue_per_pool_with_dlq(synth, spec) -> None:
    pool = next(q for q in synth.stack.queues.all if q.key == spec.key)
    queue = synth.raw["Resources"][logical_id(pool.queue)]["Properties"]
    dlq = synth.raw["Resources"][logical_id(pool.dlq)]["Properties"]
    assert queue["VisibilityTimeout"] == spec.visibility_timeout_s  # the lease
    assert queue["MessageRetentionPeriod"] == spec.retention_s
    assert queue["ReceiveMessageWaitTimeSeconds"] == spec.receive_wait_s
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [logical_id(pool.dlq), "Arn"]},
        "maxReceiveCount": spec.max_receive_count,
    }
    assert dlq["MessageRetentionPeriod"] == spec.dlq_retention_s
    for props in (queue, dlq):
        assert props["SqsManagedSseEnabled"] is True


def test_queues_reject_plain_http(synth) -> None:
    policies = synth.props("AWS::SQS::QueuePolicy")
    covered = set()
    for policy in policies:
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement["Condition"] == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                covered |= {q["Ref"] for q in policy["Queues"]}
    expected = {logical_id(q) for pool in synth.stack.queues.all for q in (pool.queue, pool.dlq)}
    assert expected <= covered


@pytest.mark.parametrize("spec", QUEUES, ids=lambda s: s.key)
def test_queue_age_alarm_notifies_the_topic(synth, spec) -> None:
    pool = next(q for q in synth.stack.queues.all if q.key == spec.key)
    topic = {"Ref": logical_id(synth.stack.alerts.topic)}
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateAgeOfOldestMessage",
            "Dimensions": [
                {
                    "Name": "QueueName",
                    "Value": {"Fn::GetAtt": [logical_id(pool.queue), "QueueName"]},
                }
            ],
            "Threshold": synth.stack.config.oldest_age_alarm_seconds,
            "AlarmActions": [topic],
        },
    )


def test_artifacts_bucket_is_private_encrypted_tls_only(synth) -> None:
    bucket_id = logical_id(synth.stack.artifacts.bucket)
    props = synth.raw["Resources"][bucket_id]["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    assert "VersioningConfiguration" not in props
    assert "CorsConfiguration" not in props  # no browser page reads artifacts cross-origin
    synth.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": bucket_id},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_artifact_lifecycle_by_retention_class(synth) -> None:
    props = synth.raw["Resources"][logical_id(synth.stack.artifacts.bucket)]["Properties"]
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    for rule in ARTIFACTS_BUCKET.lifecycle:
        cfn = rules[f"expire-{rule.retention_class}"]
        assert cfn["Status"] == "Enabled"
        assert cfn["ExpirationInDays"] == rule.expire_days
        assert cfn["TagFilters"] == [
            {"Key": ARTIFACTS_BUCKET.retention_tag, "Value": rule.retention_class}
        ]
    days = {r.retention_class: r.expire_days for r in ARTIFACTS_BUCKET.lifecycle}
    assert days["debug"] > days["routine"]
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": ARTIFACTS_BUCKET.abort_incomplete_upload_days
    }
