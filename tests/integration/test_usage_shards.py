"""A tenant's day of usage is kept in shards (``DAY_SHARDS`` items, the job choosing one) and
summed when read, so attempts ending together rarely write the same item; days written
before the shards are summed with them."""

from __future__ import annotations

from itertools import count

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.codec import serialize, tenant_pk
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore, day_shard, day_sk
from pagefleet.tenancy.usage import AttemptUsage
from tests.conftest import aws_client

DAY = "2026-12-06"


def _usage(job_id: str, seconds: float) -> AttemptUsage:
    return AttemptUsage(
        tenant_id="t-shards",
        job_id=job_id,
        attempt=1,
        workflow="nightly",
        day=DAY,
        first_attempt=True,
        browser_seconds=seconds,
    )


def _jobs_on_two_shards() -> tuple[str, str]:
    ids = (f"job-{n}" for n in count())
    first = next(ids)
    second = next(j for j in ids if day_shard(j) != day_shard(first))
    return first, second


def test_a_days_shards_are_read_as_one_row_per_day_and_workflow(
    provisioned: Provisioned,
) -> None:
    db = aws_client("dynamodb")
    store = DynamoUsageStore(db, provisioned.usage_table)
    first, second = _jobs_on_two_shards()
    assert store.record(_usage(first, 1.5)) and store.record(_usage(second, 2.0))
    items = db.query(
        TableName=provisioned.usage_table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :day)",
        ExpressionAttributeValues=serialize({":pk": tenant_pk("t-shards"), ":day": "DAY#"}),
    )["Items"]
    assert len(items) == 4  # two shards, each with the tenant's day and the workflow's
    rows = store.days("t-shards", DAY, DAY)
    assert [(r.workflow, r.jobs, r.browser_seconds) for r in rows] == [
        ("*", 2, 3.5),
        ("nightly", 2, 3.5),
    ]
    [every] = [r for r in store.every_tenant(DAY) if r.tenant_id == "t-shards"]
    assert (every.jobs, every.attempts, every.browser_seconds) == (2, 2, 3.5)


def test_a_day_written_before_the_shards_is_summed_with_them(provisioned: Provisioned) -> None:
    db = aws_client("dynamodb")
    store = DynamoUsageStore(db, provisioned.usage_table)
    db.put_item(  # as the store wrote a tenant's day before its shards
        TableName=provisioned.usage_table,
        Item=serialize(
            {
                "pk": tenant_pk("t-shards"),
                "sk": day_sk(DAY),
                "tenant_id": "t-shards",
                "day_pk": f"DAY#{DAY}",
                "day_sk": "t-shards",
                "jobs": 3,
                "attempts": 4,
                "browser_ms": 6000,
            }
        ),
    )
    assert store.record(_usage("job-after", 1.0))
    [day] = [r for r in store.days("t-shards", DAY, DAY) if r.workflow == "*"]
    assert (day.jobs, day.attempts, day.browser_seconds) == (4, 5, 7.0)
    [every] = [r for r in store.every_tenant(DAY) if r.tenant_id == "t-shards"]
    assert (every.jobs, every.attempts) == (4, 5)
