"""A job in needs_review through the API handlers, against the moto server: resolving it
(tenant only, audited, 409 naming the state), listing, counting and deleting it."""

from __future__ import annotations

import boto3
import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.service import JobServices
from tests.support.api import ApiCaller, caller
from tests.support.review import stop_in_review

ORDER = {
    "steps": [
        {"action": "goto", "url": "http://127.0.0.1:9/order"},
        {"action": "click", "selector": "#place", "irreversible": True, "label": "Place order"},
        {"action": "extract", "name": "number", "selector": "#number"},
    ]
}


@pytest.fixture
def admin(api_env: Provisioned) -> ApiCaller:
    return caller(api_env, "ops", admin=True)


def in_review(svc: JobServices, api_env: Provisioned, alice: ApiCaller) -> str:
    """Alice's order job, whose first attempt stopped after its click (as a worker writes)."""
    job_id = str(alice.post_job(ORDER).body["job_id"])
    sqs = boto3.client("sqs")
    queue = api_env.queue_urls["standard"]
    for message in sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)["Messages"]:
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    stop_in_review(svc.store, "alice", job_id, step=1, label="Place order", result={"before": 1})
    return job_id


def test_a_job_in_review_is_resolved_by_its_tenant_only_and_audited(
    svc: JobServices, api_env: Provisioned, alice: ApiCaller, bob: ApiCaller, admin: ApiCaller
) -> None:
    job_id = in_review(svc, api_env, alice)
    listed = alice.call("GET", "/v1/jobs", query="status=needs_review").body["jobs"]
    assert [j["job_id"] for j in listed] == [job_id]
    view = alice.get_job(job_id).body
    assert view["checkpoints"][0]["state"] == "unknown" and view["error"]["kind"] == "needs_review"
    assert alice.call("GET", "/v1/stats").body["counts"]["needs_review"] == 1

    path = f"/v1/jobs/{job_id}/resolve"
    contradiction = alice.call("POST", path, {"outcome": "not_done", "continue": True})
    assert contradiction.status in (400, 422) and "continue" in str(contradiction.body)
    unknown_word = alice.call("POST", path, {"outcome": "maybe"})
    assert unknown_word.status in (400, 422) and "outcome" in str(unknown_word.body)
    assert bob.call("POST", path, {"outcome": "done"}).status == 404
    assert alice.get_job(job_id).body["status"] == "needs_review"

    done = alice.call("POST", path, {"outcome": "done"})
    assert done.status == 200, done.body
    assert done.body["status"] == "succeeded" and done.body["result"] == {"before": 1}
    assert done.body["resolution"]["outcome"] == "done"
    assert done.body["resolution"]["continue"] is False
    assert done.body["resolution"]["skipped"] == [2]
    assert done.body["checkpoints"][0]["how"] == "resolved"

    again = alice.call("POST", path, {"outcome": "done"})
    assert again.status == 409
    assert again.error["code"] == "conflict" and "succeeded" in again.error["message"]
    audit = admin.call("GET", "/v1/admin/audit").body["records"]
    [record] = [r for r in audit if r["action"] == "job.resolved" and r["target"] == job_id]
    assert record["actor"].startswith("alice:") and record["tenant_id"] == "alice"
    assert record["details"] == {"outcome": "done", "continue": False, "status": "succeeded"}


def test_resolved_not_done_the_job_is_queued_again(
    svc: JobServices, api_env: Provisioned, alice: ApiCaller
) -> None:
    job_id = in_review(svc, api_env, alice)
    queued = alice.call("POST", f"/v1/jobs/{job_id}/resolve", {"outcome": "not_done"})
    assert queued.status == 200 and queued.body["status"] == "queued"
    assert queued.body["enqueued_at"] is not None
    messages = boto3.client("sqs").receive_message(
        QueueUrl=api_env.queue_urls["standard"], WaitTimeSeconds=1
    )["Messages"]
    assert [m for m in messages if job_id in m["Body"]]


def test_a_job_in_review_is_deleted_at_once(
    svc: JobServices, api_env: Provisioned, alice: ApiCaller
) -> None:
    job_id = in_review(svc, api_env, alice)
    gone = alice.call("DELETE", f"/v1/jobs/{job_id}")
    assert gone.status == 200 and gone.body["status"] == "deleted"
    assert alice.get_job(job_id).status == 404


def test_validate_says_a_workflow_using_the_idempotency_key_needs_the_header(
    api_env: Provisioned, alice: ApiCaller
) -> None:
    keyed = {
        "steps": [
            {"action": "goto", "url": "http://127.0.0.1:9/"},
            {"action": "fill", "selector": "#ref", "value": "{{job.idempotency_key}}"},
        ]
    }
    without = alice.call("POST", "/v1/jobs/validate", keyed).body
    assert not without["valid"] and "Idempotency-Key" in without["errors"][0]["message"]
    with_key = alice.call("POST", "/v1/jobs/validate", keyed, headers={"Idempotency-Key": "k"})
    assert with_key.body == {"valid": True, "errors": []}
    assert alice.post_job(keyed).status in (400, 422)
    assert alice.post_job(keyed, headers={"Idempotency-Key": "k"}).status == 202
