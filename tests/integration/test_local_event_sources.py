"""The local stack's event sources invoke the real handlers with AWS's event shapes."""

from __future__ import annotations

import json

import boto3

from devstack.pollers import DeadLetterPoller, sweeper_timer
from devstack.provision import Provisioned
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.integration.test_api import SIMPLE, queued_messages
from tests.support.api import ApiCaller


def test_dead_letter_poller_marks_jobs_and_deletes_what_it_handled(api_env: Provisioned) -> None:
    from functions.dead_letters import handler as dl

    RUNTIME.reset()
    tenant = ApiCaller(create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "acme")[0])
    job = tenant.post_job(SIMPLE).body
    [message] = queued_messages(api_env)
    sqs = boto3.client("sqs")
    dlq = api_env.dlq_urls["standard"]
    # What SQS's redrive does after maxReceiveCount: the same body lands in the DLQ.
    sqs.send_message(QueueUrl=dlq, MessageBody=message["Body"])
    sqs.send_message(QueueUrl=dlq, MessageBody="not json at all")

    poller = DeadLetterPoller(api_env.dlq_urls, wait_s=0)
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    handled = 0
    for _ in range(5):
        handled += poller.poll_once(sqs, dlq, arn, dl.handler)
    assert handled == 2
    record = tenant.get_job(job["job_id"]).body
    assert record["status"] == "dead_lettered"
    assert record["error"]["kind"] == "dead_lettered"
    left = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    assert (
        int(left["ApproximateNumberOfMessages"])
        + int(left["ApproximateNumberOfMessagesNotVisible"])
        == 0
    )


def test_sweeper_timer_runs_the_real_handler(api_env: Provisioned) -> None:

    RUNTIME.reset()
    timer = sweeper_timer(interval_s=3600)
    report = timer._action()  # one EventBridge tick
    assert isinstance(report, dict)
    assert set(report) == {
        "taken_back",
        "leases_dead_lettered",
        "enqueued",
        "expired",
        "leases_recovered",
        "leases_failed",
        "leases_to_review",
        "retries_resent",
        "scheduled_dispatched",
        "waiting_settled",
        "schedules_resynced",
        "sessions_lost",
        "oldest_expired_lease_s",
        "leftovers",  # killed workers' command inboxes, seen and removed
    }
    assert json.dumps(report)
