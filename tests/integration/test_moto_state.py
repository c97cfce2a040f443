"""Each test's ``provisioned`` resources are moto's state after ``create_all``, put back
(tests/support/moto_state.py): the same resources a fresh ``create_all`` makes, and nothing
an earlier test wrote, sent, stored or made."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from devstack.strict_aws import SQS_MAX_MESSAGE_BYTES
from pagefleet.specs.resources import DEFAULT_POOL, MAX_RECEIVE_COUNT
from tests.conftest import aws_client, make_resources
from tests.support.moto_state import MotoState

# What differs between two makings of the same resources: when, and names drawn from when.
_MOMENTS = {
    "CreationDateTime",
    "CreationDate",
    "LastModificationDate",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "LatestStreamLabel",
    "LatestStreamArn",
    "StreamArn",
    "TableId",
    "ResponseMetadata",
}


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in _MOMENTS}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def described(made: Provisioned) -> dict[str, Any]:
    """Everything AWS tells of the provisioned resources, and what else exists."""
    db, sqs, s3 = aws_client("dynamodb"), aws_client("sqs"), aws_client("s3")
    scheduler = aws_client("scheduler")
    tables = db.list_tables()["TableNames"]
    bucket = made.artifacts_bucket
    return _timeless(
        {
            "tables": {
                name: {
                    "table": db.describe_table(TableName=name)["Table"],
                    "ttl": db.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                    "items": db.scan(TableName=name)["Items"],
                }
                for name in tables
            },
            "queues": {
                url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
                for url in sqs.list_queues().get("QueueUrls", [])
            },
            "buckets": [b["Name"] for b in s3.list_buckets()["Buckets"]],
            "objects": s3.list_objects_v2(Bucket=bucket).get("Contents", []),
            "public_access": s3.get_public_access_block(Bucket=bucket),
            "encryption": s3.get_bucket_encryption(Bucket=bucket),
            "lifecycle": s3.get_bucket_lifecycle_configuration(Bucket=bucket),
            "groups": scheduler.list_schedule_groups()["ScheduleGroups"],
            "schedules": scheduler.list_schedules()["Schedules"],
        }
    )


def test_a_restored_state_is_what_a_fresh_create_all_makes(
    moto_endpoint: str, provisioned_state: tuple[Provisioned, MotoState]
) -> None:
    made, state = provisioned_state
    fresh = make_resources(moto_endpoint)  # as it was made for every test before
    assert fresh == made
    expected = described(fresh)
    assert len(expected["tables"]) == 4 and len(expected["queues"]) == 15
    answer = _bucket_made_again(fresh)
    state.restore()
    assert described(made) == expected
    assert _bucket_made_again(made) == answer


def _bucket_made_again(made: Provisioned) -> str:
    """How S3 answers CreateBucket for the bucket that exists (it keeps which account owns
    each bucket beside the buckets), and whether what the bucket held is still there."""
    s3 = aws_client("s3")
    s3.put_object(Bucket=made.artifacts_bucket, Key="kept", Body=b"kept")
    try:
        s3.create_bucket(Bucket=made.artifacts_bucket)
        answer = "made"
    except ClientError as exc:
        answer = str(exc.response["Error"]["Code"])
    kept = s3.list_objects_v2(Bucket=made.artifacts_bucket).get("KeyCount", 0)
    return f"{answer}, {kept} kept"


def _leave_traces(made: Provisioned) -> None:
    """What a test may leave behind: items, messages (waiting and in flight), an object, a
    schedule, a changed queue, resources of its own, a deleted one."""
    db, sqs, s3 = aws_client("dynamodb"), aws_client("sqs"), aws_client("s3")
    scheduler = aws_client("scheduler")
    for table in (made.jobs_table, made.tenants_table, made.usage_table, made.connections_table):
        db.put_item(TableName=table, Item={"pk": {"S": "TENANT#t"}, "sk": {"S": "JOB#1"}})
    for url in made.queue_list():
        sqs.send_message(QueueUrl=url, MessageBody="left")
        sqs.send_message(QueueUrl=url, MessageBody="in flight")
    sqs.receive_message(QueueUrl=made.queue_list()[0], MaxNumberOfMessages=1)
    sqs.set_queue_attributes(QueueUrl=made.webhook_queue_url, Attributes={"VisibilityTimeout": "1"})
    s3.put_object(Bucket=made.artifacts_bucket, Key="t/left.txt", Body=b"left")
    assert made.schedule_group is not None and made.scheduler_dlq_arn is not None
    scheduler.create_schedule(
        Name="left",
        GroupName=made.schedule_group,
        ScheduleExpression="rate(1 hour)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": made.scheduler_dlq_arn, "RoleArn": "arn:aws:iam::123456789012:role/r"},
    )
    sqs.create_queue(QueueName="a-tests-own")
    db.create_table(
        TableName="a-tests-own",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    s3.create_bucket(Bucket="a-tests-own")
    db.delete_table(TableName=made.usage_table)


def test_nothing_a_test_leaves_is_there_for_the_next(
    provisioned: Provisioned, provisioned_state: tuple[Provisioned, MotoState]
) -> None:
    expected = described(provisioned)
    _leave_traces(provisioned)
    assert described(provisioned) != expected
    provisioned_state[1].restore()
    assert described(provisioned) == expected
    # The next test's copy is its own: what this one leaves is not in it either.
    _leave_traces(provisioned)
    provisioned_state[1].restore()
    assert described(provisioned) == expected


def test_a_restored_queue_redrives_to_its_own_dead_letter_queue(
    provisioned: Provisioned,
) -> None:
    sqs = aws_client("sqs")
    url, dlq = provisioned.queue_urls[DEFAULT_POOL], provisioned.dlq_urls[DEFAULT_POOL]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    for _ in range(MAX_RECEIVE_COUNT):
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, VisibilityTimeout=0)
        assert [m["Body"] for m in got["Messages"]] == ["poison"]
    # Received as often as the redrive policy allows: the next receive moves it (a long
    # poll that finds nothing else).
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    moved = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=1)
    assert [m["Body"] for m in moved["Messages"]] == ["poison"]


def test_the_suites_strict_rules_hold_on_restored_resources(provisioned: Provisioned) -> None:
    sqs, db = aws_client("sqs"), aws_client("dynamodb")
    with pytest.raises(ClientError) as too_long:
        sqs.send_message(
            QueueUrl=provisioned.webhook_queue_url, MessageBody="x" * (SQS_MAX_MESSAGE_BYTES + 1)
        )
    assert too_long.value.response["Error"]["Code"] == "InvalidParameterValue"
    db.put_item(
        TableName=provisioned.jobs_table,
        Item={"pk": {"S": "t"}, "sk": {"S": "big"}, "v": {"S": "x" * 300_000}},
    )
    with pytest.raises(ClientError) as refused:
        db.update_item(
            TableName=provisioned.jobs_table,
            Key={"pk": {"S": "t"}, "sk": {"S": "big"}},
            UpdateExpression="SET w = :w",
            ExpressionAttributeValues={":w": {"S": "y" * 200_000}},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
