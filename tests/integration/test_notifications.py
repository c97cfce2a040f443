"""Final states, read from the jobs stream by the real job_changes handler (moto): a webhook
message on the webhook queue, and an EventBridge event that a user's rule routes to SQS."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from devstack.event_sources import StreamPoller
from devstack.provision import Provisioned
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from tests.support.review import stop_in_review

REQUEST = JobRequest.model_validate(
    {
        "steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}],
        "notify": {"webhook": "https://hooks.example.com/pf"},
    }
)


@pytest.fixture
def changes_env(provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Provisioned:
    for name, value in {
        "PAGEFLEET_JOBS_TABLE": provisioned.jobs_table,
        "PAGEFLEET_TENANTS_TABLE": provisioned.tenants_table,
        "PAGEFLEET_ARTIFACTS_BUCKET": provisioned.artifacts_bucket,
        "PAGEFLEET_QUEUE_URLS": json.dumps(provisioned.queue_urls),
        "PAGEFLEET_WEBHOOK_QUEUE_URL": provisioned.webhook_queue_url,
        "PAGEFLEET_EVENT_BUS_NAME": "default",
    }.items():
        monkeypatch.setenv(name, value)
    RUNTIME.reset()
    return provisioned


def rule_to_queue() -> str:
    """What a user does: a rule on the default bus for pagefleet's Job Finished -> SQS."""
    sqs, events = RUNTIME.client("sqs"), RUNTIME.client("events")
    url = sqs.create_queue(QueueName="my-finished-jobs")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="pagefleet-finished",
        EventPattern=json.dumps({"source": ["pagefleet"], "detail-type": ["Job Finished"]}),
    )
    events.put_targets(Rule="pagefleet-finished", Targets=[{"Id": "queue", "Arn": arn}])
    return str(url)


def drain(url: str, want: int, timeout: float = 30) -> list[dict[str, Any]]:
    sqs = RUNTIME.client("sqs")
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        resp = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in resp.get("Messages", []):
            got.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return got


def test_a_final_state_queues_its_webhook_and_puts_one_event(
    changes_env: Provisioned, svc: JobServices
) -> None:
    from functions.job_changes import handler as changes

    target = rule_to_queue()
    poller = StreamPoller(changes_env.jobs_table, lambda e: changes.handler(e, None)).start()
    try:
        finished = submit_job(svc, "tenant-a", REQUEST).job
        running = submit_job(svc, "tenant-a", REQUEST).job
        svc.store.transition("tenant-a", finished.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
        (event,) = drain(target, 1)
        (webhook,) = drain(changes_env.webhook_queue_url, 1)
        # Nothing more arrives: the running job is not finished; no duplicate of the first.
        assert drain(target, 1, timeout=2) == []
    finally:
        poller.stop()
    assert (event["source"], event["detail-type"]) == ("pagefleet", "Job Finished")
    assert event["detail"] == {
        "tenant_id": "tenant-a",
        "job_id": finished.job_id,
        "correlation_id": finished.correlation_id,
        "status": "cancelled",
    }
    assert webhook["url"] == "https://hooks.example.com/pf" and webhook["job_id"] == finished.job_id
    body = json.loads(webhook["body"])
    assert body["status"] == "cancelled" and body["delivery_id"] == webhook["delivery_id"]
    assert running.job_id not in json.dumps(event)


def test_a_job_going_to_review_is_put_as_job_needs_review_and_queued_for_its_webhook(
    changes_env: Provisioned, svc: JobServices
) -> None:
    from functions.job_changes import handler as changes

    sqs, events = RUNTIME.client("sqs"), RUNTIME.client("events")
    url = sqs.create_queue(QueueName="my-jobs-in-review")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    # A user's rule for the jobs a person must resolve.
    events.put_rule(
        Name="pagefleet-review",
        EventPattern=json.dumps({"source": ["pagefleet"], "detail-type": ["Job Needs Review"]}),
    )
    events.put_targets(Rule="pagefleet-review", Targets=[{"Id": "queue", "Arn": arn}])
    poller = StreamPoller(changes_env.jobs_table, lambda e: changes.handler(e, None)).start()
    try:
        job = submit_job(svc, "tenant-a", REQUEST).job
        stop_in_review(svc.store, "tenant-a", job.job_id, step=0, label="Pay")
        (event,) = drain(url, 1)
        (webhook,) = drain(changes_env.webhook_queue_url, 1)
    finally:
        poller.stop()
    assert (event["source"], event["detail-type"]) == ("pagefleet", "Job Needs Review")
    assert event["detail"]["job_id"] == job.job_id
    assert event["detail"]["status"] == "needs_review"
    assert webhook["job_id"] == job.job_id
    assert json.loads(webhook["body"])["status"] == "needs_review"


def test_jobs_ending_together_read_their_tenants_default_webhook_once(
    changes_env: Provisioned, svc: JobServices
) -> None:
    from functions.job_changes import handler as changes
    from pagefleet.adapters.dynamodb.deliveries import DynamoNotifyDefaults

    db = RUNTIME.client("dynamodb")
    DynamoNotifyDefaults(db, changes_env.tenants_table).put(
        "tenant-d", "https://hooks.example.com/d"
    )
    reads: list[str] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == changes_env.tenants_table:
            reads.append(str(params["Key"]["sk"]["S"]))

    db.meta.events.register("provide-client-params.dynamodb.GetItem", count)
    plain = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
    poller = StreamPoller(changes_env.jobs_table, lambda e: changes.handler(e, None)).start()
    try:
        ids = [submit_job(svc, "tenant-d", plain).job.job_id for _ in range(3)]
        for job_id in ids:
            svc.store.transition("tenant-d", job_id, JobStatus.CANCELLED, at=iso(utcnow()))
        webhooks = drain(changes_env.webhook_queue_url, 3)
    finally:
        poller.stop()
        db.meta.events.unregister("provide-client-params.dynamodb.GetItem", count)
    assert sorted(w["job_id"] for w in webhooks) == sorted(ids)
    assert {w["url"] for w in webhooks} == {"https://hooks.example.com/d"}
    assert reads.count("NOTIFY") == 1  # the stream reader keeps it (DEFAULTS_TTL_S)
