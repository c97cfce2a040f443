"""Tenant limits, usage, batches, deletion, sessions and audit through the API handlers,
against the moto server, with API Gateway events."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient

from devstack.event_sources import stream_event
from devstack.provision import Provisioned
from pagefleet import ids
from pagefleet.adapters.dynamodb.codec import deserialize
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.adapters.dynamodb.stream import job_changes
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs.resources import queue_key
from pagefleet.specs.settings import ApiSettings
from pagefleet.tenancy.limits import IDEMPOTENCY_TTL_S
from pagefleet.tenancy.retention import RetentionConsumer
from pagefleet.tenancy.sessions import SessionArchive
from pagefleet.tenancy.usage import AttemptUsage
from tests.support.api import ApiCaller, HttpResult, caller

JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}
POOL_QUEUE = queue_key("standard", "normal")


@pytest.fixture
def admin(api_env: Provisioned) -> ApiCaller:
    return caller(api_env, "ops", admin=True)


def set_limits(admin: ApiCaller, tenant: str, **limits: Any) -> HttpResult:
    resp = admin.call("PATCH", f"/v1/admin/tenants/{tenant}/limits", limits)
    assert resp.status == 200, resp.body
    return resp


def item(env: Provisioned, table: str, pk: str, sk: str) -> dict[str, Any]:
    got = boto3.client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    )
    return deserialize(got.get("Item", {}))


# --- limits -------------------------------------------------------------------------------------
def test_a_burst_over_the_rate_is_429_with_retry_after_and_ratelimit_headers(
    admin: ApiCaller, alice: ApiCaller, bob: ApiCaller
) -> None:
    set_limits(admin, "alice", submits_per_minute=6, burst=2)
    first = alice.post_job(JOB)
    assert first.status == 202
    assert first.headers["RateLimit-Limit"] == "2"
    assert first.headers["RateLimit-Remaining"] == "1"
    assert alice.post_job(JOB).status == 202
    refused = alice.post_job(JOB)
    assert refused.status == 429
    assert refused.error["code"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 10
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert int(refused.headers["RateLimit-Reset"]) >= int(refused.headers["Retry-After"])
    assert bob.post_job(JOB).status == 202  # one tenant's rate is not another's


def test_a_submission_spends_its_token_and_holds_its_room_in_one_write(
    api_env: Provisioned, alice: ApiCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a submission pays in tenant counters (bench/aws_requests.py): one conditional
    UpdateItem, where the rate bucket and the queued count were a write each."""
    writes: list[str] = []
    make_call = BaseClient._make_api_call

    def counted(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if operation == "UpdateItem" and params.get("TableName") == api_env.tenants_table:
            writes.append(str(params["Key"]["sk"]["S"]))
        return make_call(client, operation, params)

    assert alice.post_job(JOB).status == 202  # the tenant's first: its items are made
    with monkeypatch.context() as patched:
        patched.setattr(BaseClient, "_make_api_call", counted)
        assert alice.post_job(JOB).status == 202
    assert writes == ["LIMIT#QUEUED"]
    counts = item(api_env, api_env.tenants_table, "TENANT#alice", "LIMIT#QUEUED")
    assert (counts["queued"], counts["minute_count"]) == (2, 2)


def test_the_queued_cap_is_429_naming_the_limit(admin: ApiCaller, alice: ApiCaller) -> None:
    set_limits(admin, "alice", max_queued=2)
    assert [alice.post_job(JOB).status for _ in range(2)] == [202, 202]
    full = alice.post_job(JOB)
    assert full.status == 429
    assert full.error["code"] == "queue_full"
    assert "max_queued" in full.error["message"]
    assert full.error["details"][0]["limit"] == "max_queued"
    assert "Retry-After" in full.headers


def test_a_tenant_sees_its_limits_and_current_usage(admin: ApiCaller, alice: ApiCaller) -> None:
    set_limits(admin, "alice", max_running=3, allow_evaluate=True)
    alice.post_job(JOB)
    alice.post_job(JOB)
    view = alice.call("GET", "/v1/tenant")
    assert view.status == 200
    assert view.body["tenant_id"] == "alice"
    assert view.body["limits"]["max_running"] == 3
    assert view.body["limits"]["allow_evaluate"] is True
    assert view.body["overrides"] == ["allow_evaluate", "max_running"]
    usage = view.body["usage"]
    assert (usage["queued"], usage["running"], usage["submissions_this_minute"]) == (2, 0, 2)


def test_a_tenants_trace_mode_is_what_its_jobs_that_do_not_say_record(
    admin: ApiCaller, alice: ApiCaller
) -> None:
    """A job's trace mode is settled when it is made: its own, else its tenant's, else
    Playwright Test's default (on-first-retry)."""

    def mode(request: dict[str, Any]) -> str:
        made = alice.post_job(request)
        assert made.status == 202, made.body
        return str(alice.get_job(made.body["job_id"]).body["request"]["options"]["trace"])

    assert mode(JOB) == "on-first-retry"
    assert set_limits(admin, "alice", trace="retain-on-failure").body["limits"]["trace"] == (
        "retain-on-failure"
    )
    assert mode(JOB) == "retain-on-failure"
    assert mode({**JOB, "options": {"trace": "on"}}) == "on"
    assert mode({**JOB, "options": {"trace": True}}) == "on"  # as before the modes
    assert mode({**JOB, "options": {"trace": False}}) == "off"
    refused = alice.post_job({**JOB, "options": {"trace": "sometimes"}})
    assert refused.status == 422
    assert "options.trace" in str(refused.body), refused.body
    bad = admin.call("PATCH", "/v1/admin/tenants/alice/limits", {"trace": "sometimes"})
    assert bad.status == 422 and "trace" in str(bad.body), bad.body


def test_limits_are_an_admins_and_leave_an_audit_record(admin: ApiCaller, alice: ApiCaller) -> None:
    assert alice.call("PATCH", "/v1/admin/tenants/alice/limits", {"max_running": 99}).status == 403
    bad = admin.call("PATCH", "/v1/admin/tenants/alice/limits", {"max_running": 0})
    assert bad.status == 422 and bad.error["field"] == "max_running"
    assert admin.call("PATCH", "/v1/admin/tenants/alice/limits", {}).status == 400
    changed = set_limits(admin, "alice", max_running=4)
    assert changed.body["limits"]["max_running"] == 4
    reset = set_limits(admin, "alice", reset=["max_running"])
    assert (
        reset.body["limits"]["max_running"]
        == ApiSettings.model_fields["tenant_defaults"]
        .get_default(call_default_factory=True)
        .max_running
    )
    audit = admin.call("GET", "/v1/admin/audit", query="limit=10")
    assert audit.status == 200
    records = audit.body["records"]
    assert [r["action"] for r in records[:2]] == ["limits.changed", "limits.changed"]
    assert records[1]["details"]["after"] == {"max_running": 4}
    assert records[0]["actor"].startswith("ops:")
    assert alice.call("GET", "/v1/admin/audit").status == 403
    view = admin.call("GET", "/v1/admin/tenants/alice")
    assert view.status == 200 and view.body["tenant_id"] == "alice"


def test_an_audit_listing_refuses_a_before_that_is_no_audit_id(admin: ApiCaller) -> None:
    set_limits(admin, "alice", max_running=4)
    # Shaped like an id but not one: letters base32 leaves out (i, l, o, u), or past 7zzz....
    for before in ("ykf1v1iw94xheha86ad58ks8oa", "8" + "z" * 25):
        bad = admin.call("GET", "/v1/admin/audit", query=f"before={before}&limit=41")
        assert bad.status == 422 and bad.error["field"] == "before", (before, bad.body)
    # A well-formed id no record holds is still a place in time order: older records follow.
    later = admin.call("GET", "/v1/admin/audit", query=f"before={ids.new_ulid()}").body
    assert later["records"] and later["records"][0]["action"] == "limits.changed"


# --- batches ------------------------------------------------------------------------------------
def test_a_batch_answers_each_job_and_counts_each_against_the_rate(
    admin: ApiCaller, alice: ApiCaller
) -> None:
    set_limits(admin, "alice", submits_per_minute=60, burst=3)
    body = {
        "jobs": [
            {"job": JOB, "idempotency_key": "a"},
            {"job": JOB, "idempotency_key": "a"},  # the same key again: a replay
            {"job": {**JOB, "name": "other"}, "idempotency_key": "a"},  # another body: 409
            {"job": JOB},
        ]
    }
    resp = alice.call("POST", "/v1/batches", body)
    assert resp.status == 200, resp.body
    results = resp.body["results"]
    assert [r["status"] for r in results] == [202, 202, 409, 429]
    assert results[1]["replayed"] and results[1]["job_id"] == results[0]["job_id"]
    assert results[2]["error"]["code"] == "idempotency_key_reused"
    assert results[3]["error"]["code"] == "rate_limited"
    assert resp.body["accepted"] == 2
    assert "Retry-After" in resp.headers
    assert alice.call("POST", "/v1/batches", {"jobs": [{"job": JOB}] * 101}).status == 422


# --- usage --------------------------------------------------------------------------------------
def test_usage_reports_jobs_browser_seconds_and_cost_in_both_regions(
    api_env: Provisioned, admin: ApiCaller, alice: ApiCaller
) -> None:
    job_id = alice.post_job({**JOB, "name": "prices"}).body["job_id"]
    store = DynamoUsageStore(RUNTIME.client("dynamodb"), api_env.usage_table)
    today = datetime.now(UTC).date().isoformat()
    for attempt, seconds in ((1, 2.5), (2, 1.5)):
        store.record(
            AttemptUsage(
                tenant_id="alice",
                job_id=job_id,
                attempt=attempt,
                workflow="prices",
                day=today,
                first_attempt=attempt == 1,
                browser_seconds=seconds,
                page_requests=10,
                artifact_bytes=50_000,
                artifact_puts=1,
            )
        )
    report = alice.call("GET", "/v1/usage", query=f"from={today}&to={today}")
    assert report.status == 200, report.body
    total = report.body["total"]
    assert (total["jobs"], total["attempts"], total["browser_seconds"]) == (1, 2, 4.0)
    assert set(total["cost"]) == {"us-east-1", "ap-south-1"}
    assert total["cost"]["ap-south-1"]["total_usd"] > total["cost"]["us-east-1"]["total_usd"] > 0
    assert [w["workflow"] for w in report.body["workflows"]] == ["prices"]
    assert report.body["prices"]["as_of"]
    per_job = alice.call("GET", f"/v1/jobs/{job_id}/usage")
    assert [a["attempt"] for a in per_job.body["attempts"]] == [1, 2]
    assert per_job.body["total"]["browser_seconds"] == 4.0
    everyone = admin.call("GET", "/v1/admin/usage", query=f"from={today}&to={today}")
    assert [t["tenant_id"] for t in everyone.body["tenants"]] == ["alice"]
    assert alice.call("GET", "/v1/usage", query="from=2026-01-01&to=2026-12-31").status == 400


# --- deletion -----------------------------------------------------------------------------------
def put_artifacts(env: Provisioned, tenant: str, job_id: str) -> None:
    s3 = boto3.client("s3")
    for attempt in (1, 2):
        s3.put_object(
            Bucket=env.artifacts_bucket, Key=f"{tenant}/{job_id}/{attempt}/shot.png", Body=b"x"
        )


def objects(env: Provisioned, prefix: str) -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=env.artifacts_bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_delete_removes_the_job_its_key_and_every_attempts_artifacts(
    api_env: Provisioned, alice: ApiCaller, bob: ApiCaller, admin: ApiCaller
) -> None:
    job_id = alice.post_job(JOB, headers={"Idempotency-Key": "k1"}).body["job_id"]
    put_artifacts(api_env, "alice", job_id)
    # Its run events (as a worker writes them): deleted with it.
    events = DynamoEventStore(RUNTIME.client("dynamodb"), api_env.jobs_table)
    events.allocate("alice", job_id, count=1, bounded=1, expires_at=int(time.time()) + 60)
    events.put("alice", job_id, [{"seq": 1, "type": "log"}], expires_at=2**31, attempt=1)
    assert bob.call("DELETE", f"/v1/jobs/{job_id}").status == 200  # not bob's: nothing happens
    assert alice.get_job(job_id).status == 200 and objects(api_env, f"alice/{job_id}/")
    gone = alice.call("DELETE", f"/v1/jobs/{job_id}")
    assert gone.status == 200, gone.body
    assert gone.body["status"] == "deleted" and gone.body["artifacts_deleted"] == 2
    assert alice.get_job(job_id).status == 404
    assert objects(api_env, f"alice/{job_id}/") == []
    left = RUNTIME.client("dynamodb").query(
        TableName=api_env.jobs_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "TENANT#alice"}},
    )["Items"]
    assert not [i for i in left if job_id in i["sk"]["S"]], left
    assert alice.call("DELETE", f"/v1/jobs/{job_id}").status == 200  # idempotent
    # The Idempotency-Key went with it: it makes a new job now.
    again = alice.post_job(JOB, headers={"Idempotency-Key": "k1"})
    assert again.status == 202 and again.body["job_id"] != job_id
    audit = admin.call("GET", "/v1/admin/audit").body["records"]
    deleted = [r for r in audit if r["action"] == "job.deleted" and r["target"] == job_id]
    assert deleted and deleted[0]["actor"].startswith("alice:")


# --- data lifecycle -----------------------------------------------------------------------------
def test_idempotency_keys_expire_after_a_day(api_env: Provisioned, alice: ApiCaller) -> None:
    from pagefleet.adapters.dynamodb.codec import idempotency_sk

    job = alice.post_job(JOB, headers={"Idempotency-Key": "ttl"}).body["job"]
    idem = item(api_env, api_env.jobs_table, "TENANT#alice", idempotency_sk("ttl"))
    created = datetime.fromisoformat(job["created_at"].replace("Z", "+00:00")).timestamp()
    assert idem["expires_at"] == int(created) + IDEMPOTENCY_TTL_S
    replayed = alice.post_job(JOB, headers={"Idempotency-Key": "ttl"})
    assert replayed.body["job_id"] == job["job_id"]
    other_body = {**JOB, "max_attempts": 2}
    assert alice.post_job(other_body, headers={"Idempotency-Key": "ttl"}).status == 409

    # A day later the key is free, though its item is still there: DynamoDB's TTL deletes
    # an expired item days after its expires_at, and reads return it meanwhile (moto never
    # deletes it). The item as it is then:
    RUNTIME.client("dynamodb").update_item(
        TableName=api_env.jobs_table,
        Key={"pk": {"S": "TENANT#alice"}, "sk": {"S": idempotency_sk("ttl")}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    fresh = alice.post_job(other_body, headers={"Idempotency-Key": "ttl"})
    assert fresh.status == 202, fresh.body
    assert fresh.body["job_id"] != job["job_id"]
    # The key is the new job's now: deleting the first job leaves it with the new one.
    assert alice.call("DELETE", f"/v1/jobs/{job['job_id']}").status == 200
    again = alice.post_job(other_body, headers={"Idempotency-Key": "ttl"})
    assert again.status == 202 and again.body["job_id"] == fresh.body["job_id"]  # a replay


def read_stream(env: Provisioned) -> list[Any]:
    streams = boto3.client("dynamodbstreams")
    arn = boto3.client("dynamodb").describe_table(TableName=env.jobs_table)["Table"][
        "LatestStreamArn"
    ]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    return job_changes(stream_event(records, arn)["Records"])


def cancelled_with_retention(
    env: Provisioned, admin: ApiCaller, alice: ApiCaller, days: int
) -> tuple[str, RetentionConsumer]:
    """A job of alice's cancelled, its expiry written by the stream's retention consumer."""
    set_limits(admin, "alice", retention_days=days)
    job_id = alice.post_job(JOB).body["job_id"]
    assert alice.call("POST", f"/v1/jobs/{job_id}/cancel").status == 200
    settings = ApiSettings()
    consumer = RetentionConsumer(RUNTIME.job_data(settings), RUNTIME.tenancy(settings).limits)
    consumer.handle(read_stream(env))
    return job_id, consumer


def test_ended_jobs_expire_after_the_tenants_retention(
    api_env: Provisioned, admin: ApiCaller, alice: ApiCaller
) -> None:
    job_id, consumer = cancelled_with_retention(api_env, admin, alice, 3)
    record = item(api_env, api_env.jobs_table, "TENANT#alice", f"JOB#{job_id}")
    finished = datetime.fromisoformat(record["finished_at"].replace("Z", "+00:00")).timestamp()
    assert record["expires_at"] == int(finished) + 3 * 86_400
    # A job still queued has none: it must not vanish before it runs.
    waiting = alice.post_job(JOB).body["job_id"]
    consumer.handle(read_stream(api_env))
    assert "expires_at" not in item(api_env, api_env.jobs_table, "TENANT#alice", f"JOB#{waiting}")


def test_a_job_past_its_retention_is_gone_though_ttl_has_not_deleted_it(
    api_env: Provisioned, admin: ApiCaller, alice: ApiCaller
) -> None:
    job_id, _ = cancelled_with_retention(api_env, admin, alice, 3)
    expires = int(item(api_env, api_env.jobs_table, "TENANT#alice", f"JOB#{job_id}")["expires_at"])
    shown = alice.call("GET", f"/v1/jobs/{job_id}")
    assert shown.status == 200 and shown.body["expires_at"] == expires
    listed = {j["job_id"] for j in alice.call("GET", "/v1/jobs").body["jobs"]}
    assert job_id in listed
    for what in ("", "/artifacts", "/events", "/deliveries", "/usage"):
        assert alice.call("GET", f"/v1/jobs/{job_id}{what}").status == 200, what

    # Three days on. DynamoDB's TTL deletes an expired item "typically within a few days",
    # and reads return it until then (moto never deletes it): the item as it is then.
    RUNTIME.client("dynamodb").update_item(
        TableName=api_env.jobs_table,
        Key={"pk": {"S": "TENANT#alice"}, "sk": {"S": f"JOB#{job_id}"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    for what in ("", "/artifacts", "/events", "/deliveries", "/usage"):
        path = f"/v1/jobs/{job_id}{what}"
        gone = alice.call("GET", path)
        assert gone.status == 404, (path, gone.body)
    assert alice.call("POST", f"/v1/jobs/{job_id}/replay", {"offline": True}).status == 404
    listed = {j["job_id"] for j in alice.call("GET", "/v1/jobs").body["jobs"]}
    assert job_id not in listed
    assert item(api_env, api_env.jobs_table, "TENANT#alice", f"JOB#{job_id}")  # still stored
    # Its deletion still deletes what is left of it.
    assert alice.call("DELETE", f"/v1/jobs/{job_id}").status == 200


def test_a_worker_writes_the_expiry_with_the_outcome_and_the_consumer_adds_no_write(
    api_env: Provisioned, admin: ApiCaller, alice: ApiCaller
) -> None:
    set_limits(admin, "alice", retention_days=2)
    job_id = alice.post_job(JOB).body["job_id"]
    svc = RUNTIME.job_services(ApiSettings())  # the tenant gate among its hooks
    [received] = svc.queue.receive(POOL_QUEUE, max_messages=1, wait_seconds=0, visibility=60)
    claim = svc.lifecycle.claim(received, POOL_QUEUE, owner="w1", lease_seconds=60, worker="w1")
    assert claim.job is not None
    step = svc.lifecycle.finish(claim.job, Outcome(JobStatus.SUCCEEDED, result={"ok": 1}), "w1")
    assert step.status is JobStatus.SUCCEEDED
    record = item(api_env, api_env.jobs_table, "TENANT#alice", f"JOB#{job_id}")
    finished = datetime.fromisoformat(record["finished_at"].replace("Z", "+00:00")).timestamp()
    assert abs(int(record["expires_at"]) - (finished + 2 * 86_400)) <= 1
    changes = read_stream(api_env)
    settings = ApiSettings()
    consumer = RetentionConsumer(RUNTIME.job_data(settings), RUNTIME.tenancy(settings).limits)
    consumer.handle(changes)
    assert len(read_stream(api_env)) == len(changes)  # nothing written for it


def test_sessions_are_listed_deleted_and_unusable_once_expired(
    api_env: Provisioned, alice: ApiCaller, bob: ApiCaller
) -> None:
    archive = SessionArchive(RUNTIME.client("s3"), api_env.artifacts_bucket)
    now = time.time()
    archive.save("alice", "shop", {"cookies": []}, ttl_s=3600, now=now)
    archive.save("alice", "old", {"cookies": []}, ttl_s=60, now=now - 120)
    listed = alice.call("GET", "/v1/sessions")
    assert listed.status == 200
    by_name = {s["name"]: s for s in listed.body["sessions"]}
    assert set(by_name) == {"shop", "old"}
    assert not by_name["shop"]["expired"] and by_name["old"]["expired"]
    assert archive.load("alice", "old", now=now) is None  # an expired session is never used
    assert archive.load("alice", "shop", now=now) == {"cookies": []}
    assert bob.call("GET", "/v1/sessions").body["sessions"] == []
    assert bob.call("GET", "/v1/sessions/shop").status == 404
    assert alice.call("GET", "/v1/sessions/shop").body["name"] == "shop"
    assert alice.call("DELETE", "/v1/sessions/shop").status == 204
    assert alice.call("DELETE", "/v1/sessions/shop").status == 204
    assert alice.call("GET", "/v1/sessions/shop").status == 404


def test_job_messages_are_grouped_by_tenant_for_fair_queues(
    api_env: Provisioned, alice: ApiCaller, bob: ApiCaller
) -> None:
    alice.post_job(JOB)
    bob.post_job(JOB)
    got = boto3.client("sqs").receive_message(
        QueueUrl=api_env.queue_urls["standard"],
        MaxNumberOfMessages=10,
        MessageSystemAttributeNames=["MessageGroupId"],
    )["Messages"]
    groups = sorted(m["Attributes"]["MessageGroupId"] for m in got)
    assert groups == ["alice", "bob"]
