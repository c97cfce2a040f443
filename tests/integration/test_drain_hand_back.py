"""A worker that stops hands its kept jobs back without bringing them nearer their DLQ."""

from __future__ import annotations

import boto3

from browser_task.slot.receiver import give_back
from devstack.provision import Provisioned
from pagefleet.adapters.sqs import SqsJobQueue
from pagefleet.jobs.record import JobMessage
from pagefleet.specs.resources import DEFAULT_POOLS, queue_key, queues_of


def test_a_job_handed_back_at_every_drain_never_reaches_its_dlq(
    provisioned: Provisioned,
) -> None:
    """Visibility 0 would leave each receive counted: after maxReceiveCount deploys a job
    that never ran would be dead-lettered. A re-sent copy starts again at zero receives."""
    key = queue_key("standard", "normal")
    spec = next(q for q in queues_of(DEFAULT_POOLS) if q.key == key)
    queue = SqsJobQueue(boto3.client("sqs"), provisioned.queue_urls)
    job = JobMessage(tenant_id="t", job_id="j-1", attempt=1, correlation_id="c", pool="standard")
    queue.send(job)
    for _drain in range(spec.max_receive_count + 2):
        (received,) = queue.receive(key, max_messages=1, wait_seconds=1, visibility=30)
        assert received.message is not None and received.message.job_id == "j-1"
        assert received.receive_count == 1
        give_back(queue, received)
    dlq = boto3.client("sqs").receive_message(QueueUrl=provisioned.dlq_urls[key], WaitTimeSeconds=0)
    assert not dlq.get("Messages")
