"""One bad record in the jobs stream costs that record only: the job_changes handler reports
the record that failed (stream checkpoint semantics), the event source mapping bisects what
makes no progress and sends the bad record alone to its failure destination, and only job
records and run events invoke the reader. The mapping is the local stack's (``StreamMapping``),
which plays AWS's; the records are moto's, read from the real stream."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from devstack.event_sources import StreamMapping, StreamPoller, lambda_record
from devstack.fakes import FakeClock
from devstack.fakes.live import FakeConnections, FakePoster
from devstack.fakes.notify import FakeDeliveries, FakeNotifyDefaults, FakeWebhookQueue
from devstack.provision import Provisioned
from functions.job_changes import handler as job_changes_handler
from pagefleet.adapters.dynamodb.codec import serialize
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.live.delivery import LiveDelivery
from pagefleet.notify.webhooks import WebhookNotifier
from pagefleet.runtime import RUNTIME

REQUEST = JobRequest.model_validate(
    {
        "steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}],
        "notify": {"webhook": "https://hooks.example.com/pf"},
    }
)


class Followers:
    """The real live and webhook consumers, on in-memory ports: a follower of every job of
    tenant ``t`` and a webhook queue."""

    def __init__(self) -> None:
        clock = FakeClock(1_800_000_000.0)
        self.connections, self.poster = FakeConnections(), FakePoster()
        self.connections.open("c1", tenant_id="t", key_id="k", now=0, expires_at=10**10)
        self.connections.subscribe("c1", "*", max_rooms=10)
        self.webhooks = FakeWebhookQueue()
        self.live = LiveDelivery(
            self.connections, self.poster, messages_per_s=1000, clock=clock, sleep=clock.advance
        )
        self.notifier = WebhookNotifier(
            self.webhooks, FakeNotifyDefaults(), FakeDeliveries(), retention_s=3600
        )

    @classmethod
    def of_the_handler(cls, monkeypatch: pytest.MonkeyPatch) -> Followers:
        """Followers that the job_changes handler delivers to (its only consumers)."""
        followers = cls()
        monkeypatch.setattr(
            job_changes_handler, "consumers", lambda: [followers.live, followers.notifier]
        )
        return followers

    def live_messages(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in self.poster.messages("c1"):
            out += message["messages"] if message["type"] == "batch" else [message]
        return out


def stream_records(table: str) -> tuple[str, list[dict[str, Any]]]:
    """Every record of the jobs stream so far, as the event source mapping hands them over."""
    db, streams = RUNTIME.client("dynamodb"), RUNTIME.client("dynamodbstreams")
    arn = db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = []
    while True:
        resp = streams.get_records(ShardIterator=iterator, Limit=1000)
        records += resp["Records"]
        if not resp["Records"]:
            return arn, [lambda_record(r, arn) for r in records]
        iterator = resp["NextShardIterator"]


def poison(table: str, tenant: str = "t") -> None:
    """A job item no reader can read (a damaged write, a bad migration)."""
    RUNTIME.client("dynamodb").put_item(
        TableName=table,
        Item=serialize({"pk": f"TENANT#{tenant}", "sk": "JOB#poison", "status": "melted"}),
    )


def test_a_poison_record_in_a_batch_of_100_leaves_the_other_99_delivered(
    svc: JobServices, provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    followers = Followers.of_the_handler(monkeypatch)
    events = DynamoEventStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    # Each job: created, marked queued, cancelled (3 records). 16 jobs and 3 run-events
    # items, the poison, then 16 more jobs: 100 records, the poison in the middle.
    before = [submit_job(svc, "t", REQUEST).job for _ in range(16)]
    for job in before[:3]:
        events.put(
            "t",
            job.job_id,
            [{"seq": 1, "at": iso(utcnow()), "type": "log", "message": job.job_id}],
            expires_at=int(time.time()) + 3600,
            attempt=1,
        )
    for job in before:
        svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    poison(provisioned.jobs_table)
    # Their idempotency keys are items of the same table, which must not invoke the reader.
    after = [submit_job(svc, "t", REQUEST, idempotency_key=f"k{i}").job for i in range(16)]
    for job in after:
        svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    jobs = before + after

    arn, everything = stream_records(provisioned.jobs_table)
    answers: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> Any:
        answers.append(job_changes_handler.handler(event, None))
        return answers[-1]

    mapping = StreamMapping(invoke, arn, wait=lambda seconds: False)
    batch = [r for r in everything if mapping.matches(r)]
    assert len(batch) == 100 and len(everything) == 116
    (bad,) = [r for r in batch if r["dynamodb"]["Keys"]["sk"]["S"] == "JOB#poison"]
    bad_seq = bad["dynamodb"]["SequenceNumber"]
    assert batch.index(bad) == 51

    assert mapping.process(batch)

    # The first invocation named the poison: the records before it were done there and then.
    assert answers[0] == {"batchItemFailures": [{"itemIdentifier": bad_seq}]}
    assert mapping.delivered == 99
    ((failure),) = mapping.failed_batches
    info = failure["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"]) == (bad_seq, bad_seq)
    assert info["batchSize"] == 1 and info["streamArn"] == arn
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    # Every other record reached its followers, each once: statuses, events, webhooks.
    messages = followers.live_messages()
    statuses = [(m["job_id"], m["status"]) for m in messages if m["type"] == "status"]
    assert sorted(statuses) == sorted(
        [(j.job_id, "queued") for j in jobs] + [(j.job_id, "cancelled") for j in jobs]
    )
    logged = [m["events"][0]["message"] for m in messages if m["type"] == "events"]
    assert sorted(logged) == sorted(j.job_id for j in before[:3])
    assert sorted(w["job_id"] for w in followers.webhooks.sent) == sorted(j.job_id for j in jobs)


def test_the_local_poller_filters_and_checkpoints_like_the_event_source_mapping(
    svc: JobServices, provisioned: Provisioned
) -> None:
    """The running poller: only job records and run events reach the function, and each
    record the function fails comes again, with everything after it, in stream order."""
    seen: list[str] = []
    kinds: set[str] = set()
    refused: set[str] = set()

    def function(event: dict[str, Any]) -> dict[str, Any]:
        assert json.dumps(event)  # JSON, as Lambda's event is
        for record in event["Records"]:
            sequence = record["dynamodb"]["SequenceNumber"]
            if sequence not in refused:  # every record fails once
                refused.add(sequence)
                return {"batchItemFailures": [{"itemIdentifier": sequence}]}
            seen.append(sequence)
            kinds.add(record["dynamodb"]["Keys"]["sk"]["S"].split("#")[0])
        return {"batchItemFailures": []}

    poller = StreamPoller(provisioned.jobs_table, function).start()
    try:
        first = submit_job(svc, "t", REQUEST, idempotency_key="k-1").job  # 2 records + a key
        second = submit_job(svc, "t", REQUEST).job  # 2 records
        DynamoEventStore(RUNTIME.client("dynamodb"), provisioned.jobs_table).put(
            "t",
            first.job_id,
            [{"seq": 1, "at": iso(utcnow()), "type": "log"}],
            expires_at=int(time.time()) + 3600,
            attempt=1,
        )
        svc.store.transition("t", second.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
        deadline = time.monotonic() + 120
        while poller.delivered < 6:
            assert time.monotonic() < deadline, f"delivered {poller.delivered} of 6"
            time.sleep(0.05)
    finally:
        poller.stop()
    assert kinds == {"JOB", "EVT"}  # the idempotency key never invoked the function
    assert len(seen) == 6 and seen == sorted(seen, key=int)  # each once, in stream order
    assert poller.mapping is not None and poller.mapping.failed_batches == []
