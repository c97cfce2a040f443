"""What each SDK call asks IAM: requests built by boto3 itself (caught before they are sent,
no network), read as the embedded AWS reads them, mapped to action, resource and context as
the service authorization reference lists them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import pytest

from devstack.iam.calls import Account, Wire, credential, requests_for

ACCOUNT = Account("us-east-1", "123456789012")
ENDPOINT = "http://127.0.0.1:9"  # never reached: the request is caught before it is sent
USAGE = "arn:aws:dynamodb:us-east-1:123456789012:table/pagefleet-usage"
JOBS = "arn:aws:dynamodb:us-east-1:123456789012:table/pagefleet-jobs"
BUCKET = "arn:aws:s3:::pagefleet-artifacts"


class _Caught(Exception):
    def __init__(self, request: Any) -> None:
        self.request = request


def wire_of(service: str, call: Callable[[Any], Any]) -> tuple[Wire, str]:
    session = boto3.session.Session(
        aws_access_key_id="pf-worker-standard", aws_secret_access_key="x", region_name="us-east-1"
    )
    client = session.client(service, endpoint_url=ENDPOINT)  # type: ignore[call-overload]

    def catch(request: Any, **_: Any) -> None:
        raise _Caught(request)

    client.meta.events.register("before-send", catch)
    with pytest.raises(_Caught) as caught:
        call(client)
    request = caught.value.request
    url = urlsplit(request.url)
    body = request.body or b""
    if hasattr(body, "read"):
        body = body.read()
    wire = Wire(
        method=request.method,
        path=unquote(url.path),
        query=parse_qs(url.query, keep_blank_values=True),
        headers={
            k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
        },
        body=body if isinstance(body, bytes) else body.encode(),
    )
    found = credential(wire)
    assert found is not None and found[0] == "pf-worker-standard"
    return wire, found[2]


def asks(service: str, call: Callable[[Any], Any]) -> list[tuple[str, str, dict[str, Any]]]:
    wire, scope = wire_of(service, call)
    return [(r.action, r.resource, dict(r.context)) for r in requests_for(wire, scope, ACCOUNT)]


def test_item_reads_carry_their_partition_as_leading_keys() -> None:
    got = asks(
        "dynamodb",
        lambda c: c.get_item(
            TableName="pagefleet-usage", Key={"pk": {"S": "TENANT#a"}, "sk": {"S": "x"}}
        ),
    )
    assert got == [("dynamodb:GetItem", USAGE, {"dynamodb:leadingkeys": ("TENANT#a",)})]


def test_a_query_on_an_index_is_on_the_index_with_its_own_partition_key() -> None:
    got = asks(
        "dynamodb",
        lambda c: c.query(
            TableName="pagefleet-jobs",
            IndexName="by_status",
            KeyConditionExpression="#p = :p AND begins_with(sk, :s)",
            ExpressionAttributeNames={"#p": "status_pk"},
            ExpressionAttributeValues={":p": {"S": "a#queued"}, ":s": {"S": "0"}},
        ),
    )
    assert got == [
        ("dynamodb:Query", f"{JOBS}/index/by_status", {"dynamodb:leadingkeys": ("a#queued",)})
    ]


def test_a_transaction_asks_each_items_own_action() -> None:
    got = asks(
        "dynamodb",
        lambda c: c.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": "pagefleet-jobs",
                        "Item": {"pk": {"S": "a"}, "sk": {"S": "1"}},
                    }
                },
                {
                    "Update": {
                        "TableName": "pagefleet-usage",
                        "Key": {"pk": {"S": "TENANT#a"}, "sk": {"S": "d"}},
                        "UpdateExpression": "SET n = :n",
                        "ExpressionAttributeValues": {":n": {"N": "1"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": "pagefleet-jobs",
                        "Key": {"pk": {"S": "a"}, "sk": {"S": "2"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        ),
    )
    assert [(a, r) for a, r, _ in got] == [
        ("dynamodb:PutItem", JOBS),
        ("dynamodb:UpdateItem", USAGE),
        ("dynamodb:ConditionCheckItem", JOBS),
    ]
    assert got[1][2] == {"dynamodb:leadingkeys": ("TENANT#a",)}


def test_a_batch_write_names_every_partition_it_touches() -> None:
    got = asks(
        "dynamodb",
        lambda c: c.batch_write_item(
            RequestItems={
                "pagefleet-usage": [
                    {"PutRequest": {"Item": {"pk": {"S": "TENANT#a"}, "sk": {"S": "1"}}}},
                    {"DeleteRequest": {"Key": {"pk": {"S": "TENANT#b"}, "sk": {"S": "2"}}}},
                ]
            }
        ),
    )
    assert got == [
        ("dynamodb:BatchWriteItem", USAGE, {"dynamodb:leadingkeys": ("TENANT#a", "TENANT#b")})
    ]


def test_stream_reads_are_on_the_stream() -> None:
    stream = f"{JOBS}/stream/2026-12-01T00:00:00.000"
    got = asks(
        "dynamodbstreams", lambda c: c.get_records(ShardIterator=f"{stream}|1|abc", Limit=10)
    )
    assert got == [("dynamodb:GetRecords", stream, {})]


def test_sqs_batches_ask_the_single_calls_action_on_the_queue() -> None:
    url = "http://127.0.0.1:9/123456789012/pagefleet-jobs-standard"
    got = asks(
        "sqs",
        lambda c: c.delete_message_batch(QueueUrl=url, Entries=[{"Id": "1", "ReceiptHandle": "r"}]),
    )
    assert got == [
        ("sqs:DeleteMessage", "arn:aws:sqs:us-east-1:123456789012:pagefleet-jobs-standard", {})
    ]


def test_listing_queues_is_asked_on_the_accounts_queues_whatever_the_prefix() -> None:
    got = asks("sqs", lambda c: c.list_queues(QueueNamePrefix="pagefleet-dev-inbox-"))
    assert got == [("sqs:ListQueues", "arn:aws:sqs:us-east-1:123456789012:*", {})]


def test_s3_listing_is_list_bucket_with_its_prefix() -> None:
    got = asks(
        "s3",
        lambda c: c.list_objects_v2(Bucket="pagefleet-artifacts", Prefix="a/sessions/x.json"),
    )
    assert got == [("s3:ListBucket", BUCKET, {"s3:prefix": "a/sessions/x.json"})]


def test_s3_head_is_get_object_and_a_tagged_put_is_also_put_object_tagging() -> None:
    head = asks("s3", lambda c: c.head_object(Bucket="pagefleet-artifacts", Key="a/k.png"))
    assert head == [("s3:GetObject", f"{BUCKET}/a/k.png", {})]
    put = asks(
        "s3",
        lambda c: c.put_object(
            Bucket="pagefleet-artifacts", Key="a/k.png", Body=b"x", Tagging="retention=routine"
        ),
    )
    assert [a for a, _, _ in put] == ["s3:PutObject", "s3:PutObjectTagging"]


def test_delete_objects_asks_delete_object_for_each_key() -> None:
    got = asks(
        "s3",
        lambda c: c.delete_objects(
            Bucket="pagefleet-artifacts",
            Delete={"Objects": [{"Key": "a/1"}, {"Key": "a/2&3"}]},
        ),
    )
    assert got == [
        ("s3:DeleteObject", f"{BUCKET}/a/1", {}),
        ("s3:DeleteObject", f"{BUCKET}/a/2&3", {}),
    ]


def test_a_presigned_url_is_checked_as_its_signer() -> None:
    session = boto3.session.Session(
        aws_access_key_id="pf-function-api", aws_secret_access_key="x", region_name="us-east-1"
    )
    url = session.client("s3", endpoint_url=ENDPOINT).generate_presigned_url(
        "get_object", Params={"Bucket": "pagefleet-artifacts", "Key": "a/k.png"}
    )
    parts = urlsplit(url)
    wire = Wire("GET", unquote(parts.path), parse_qs(parts.query), {}, b"")
    found = credential(wire)
    assert found is not None and found[0] == "pf-function-api"
    assert [(r.action, r.resource) for r in requests_for(wire, found[2], ACCOUNT)] == [
        ("s3:GetObject", f"{BUCKET}/a/k.png")
    ]


def test_secrets_events_and_schedules() -> None:
    secret = asks("secretsmanager", lambda c: c.get_secret_value(SecretId="pagefleet/local/a/pw"))
    assert secret == [
        (
            "secretsmanager:GetSecretValue",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:pagefleet/local/a/pw",
            {},
        )
    ]
    events = asks(
        "events",
        lambda c: c.put_events(
            Entries=[{"Source": "pagefleet", "DetailType": "Job Finished", "Detail": "{}"}]
        ),
    )
    assert events == [
        ("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/default", {})
    ]
    role = "arn:aws:iam::123456789012:role/pagefleet-scheduler"
    schedule = asks(
        "scheduler",
        lambda c: c.create_schedule(
            Name="s1",
            GroupName="pagefleet-local",
            ScheduleExpression="rate(5 minutes)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": role},
        ),
    )
    assert schedule == [
        (
            "scheduler:CreateSchedule",
            "arn:aws:scheduler:us-east-1:123456789012:schedule/pagefleet-local/s1",
            {},
        ),
        ("iam:PassRole", role, {"iam:passedtoservice": "scheduler.amazonaws.com"}),
    ]


def test_assume_role_with_a_tag_asks_tag_session_too() -> None:
    role = "arn:aws:iam::123456789012:role/pagefleet-job"
    got = asks(
        "sts",
        lambda c: c.assume_role(
            RoleArn=role, RoleSessionName="tenant-a", Tags=[{"Key": "tenant", "Value": "a"}]
        ),
    )
    context = {"aws:requesttag/tenant": "a", "aws:tagkeys": ("tenant",)}
    assert got == [("sts:AssumeRole", role, context), ("sts:TagSession", role, context)]
    assert asks("sts", lambda c: c.get_caller_identity()) == []


def test_an_unmapped_call_is_named_so_no_policy_allows_it() -> None:
    got = asks("ec2", lambda c: c.describe_instances())
    assert got == [("ec2:DescribeInstances", "*", {})]
    assert json.dumps(got)  # plain data, as the report carries it
