"""Eventually consistent reads (``devstack.stale_reads``): a new item may be missing.

DynamoDB's GetItem without ``ConsistentRead`` may not see a write that just completed; the
embedded AWS answers a share of such reads of new items without them. Our readers that read
eventually (a worker's first look at a job, an API key's lookup, a tenant's default
webhook) do not take a miss for an answer: they read again, consistently.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.provision import Provisioned
from devstack.strict_aws import LENIENT, StrictRules, rules_in_force
from pagefleet.adapters.dynamodb.deliveries import DynamoNotifyDefaults
from pagefleet.adapters.dynamodb.job_store import DynamoJobStore
from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.ports import ApiKeyRecord
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from tests.conftest import aws_client

# Every eventually consistent read of a new item misses it: the worst AWS allows.
MISSING = StrictRules(queue_settle_s=0, dynamodb_stale_read_share=1.0)


@pytest.fixture
def db(provisioned: Provisioned) -> Any:
    return aws_client("dynamodb")


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "T#stale"}, "sk": {"S": sk}}


def _read(db: Any, table: str, sk: str, *, consistent: bool) -> bool:
    return "Item" in db.get_item(TableName=table, Key=_key(sk), ConsistentRead=consistent)


def test_a_new_item_is_missing_from_an_eventually_consistent_read(
    db: Any, provisioned: Provisioned
) -> None:
    table = provisioned.tenants_table
    with rules_in_force(LENIENT):
        db.put_item(TableName=table, Item={**_key("old"), "v": {"N": "1"}})
    with rules_in_force(MISSING):
        db.put_item(TableName=table, Item={**_key("new"), "v": {"N": "1"}})
        db.update_item(
            TableName=table,
            Key=_key("made-by-update"),
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
        db.put_item(TableName=table, Item={**_key("old"), "v": {"N": "2"}})  # not new
        assert not _read(db, table, "new", consistent=False)
        assert not _read(db, table, "made-by-update", consistent=False)
        assert _read(db, table, "new", consistent=True)
        assert _read(db, table, "old", consistent=False)


def test_lenient_moto_finds_a_new_item_in_any_read(db: Any, provisioned: Provisioned) -> None:
    table = provisioned.tenants_table
    with rules_in_force(LENIENT):
        db.put_item(TableName=table, Item={**_key("fresh"), "v": {"N": "1"}})
        assert _read(db, table, "fresh", consistent=False)


def _job(job_id: str) -> JobRecord:
    return JobRecord(
        tenant_id="t",
        job_id=job_id,
        status=JobStatus.QUEUED,
        request=JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://h/"}]}),
        created_at="2026-12-06T00:00:00.000Z",
        updated_at="2026-12-06T00:00:00.000Z",
        correlation_id="c",
        pool="standard",
    )


def test_a_worker_finds_a_job_written_a_moment_before(db: Any, provisioned: Provisioned) -> None:
    # The worker's first look at a job it was just sent reads eventually: a miss there had
    # it delete the job's message as "job not found", and the job waited for its deadline.
    store = DynamoJobStore(db, provisioned.jobs_table)
    with rules_in_force(MISSING):
        store.create(_job("j-new"))
        assert store.get("t", "j-new", consistent=False).job_id == "j-new"


def test_a_new_api_key_and_a_new_default_webhook_are_found_at_once(
    db: Any, provisioned: Provisioned
) -> None:
    keys = DynamoTenantStore(db, provisioned.tenants_table)
    webhooks = DynamoNotifyDefaults(db, provisioned.tenants_table)
    record = ApiKeyRecord("k1", "t", "ci", "2026-12-06T00:00:00Z", revoked=False, admin=False)
    with rules_in_force(MISSING):
        keys.put_key(record, "hash-new")
        webhooks.put("t-new", "https://hooks.example/x")
        assert keys.find_key("hash-new") == record
        assert webhooks.get("t-new") == "https://hooks.example/x"
