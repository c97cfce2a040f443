"""The jobs table's stream, read as AWS's event source mapping reads it, to job changes."""

from __future__ import annotations

import threading
from typing import Any

from devstack.event_sources import StreamPoller
from devstack.provision import Provisioned
from functions.job_changes import handler as job_changes_handler
from pagefleet.adapters.dynamodb.stream import job_changes
from pagefleet.jobs.changes import JobChange, deliver
from pagefleet.jobs.dependencies import DependencyRelease
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.changes: list[JobChange] = []
        self.fail_next = False

    def handle(self, changes: Any) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("consumer down")
        self.changes += list(changes)


def test_the_stream_poller_delivers_every_change_in_order(
    svc: JobServices, provisioned: Provisioned
) -> None:
    recorder = Recorder()
    delivered = threading.Event()

    def function(event: dict[str, Any]) -> dict[str, Any]:
        changes = job_changes(event["Records"])
        assert all(r["eventSource"] == "aws:dynamodb" for r in event["Records"])
        failed = deliver(changes, [recorder])
        if any(c.became is JobStatus.CANCELLED for c in recorder.changes):
            delivered.set()
        if failed:
            first = event["Records"][0]["dynamodb"]["SequenceNumber"]
            return {"batchItemFailures": [{"itemIdentifier": first}]}
        return {"batchItemFailures": []}

    poller = StreamPoller(provisioned.jobs_table, function).start()
    try:
        recorder.fail_next = True  # the first batch fails once and is delivered again
        job = submit_job(svc, "t", REQUEST).job
        svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
        assert delivered.wait(30), "the cancellation never reached the consumer"
    finally:
        poller.stop()
    mine = [c for c in recorder.changes if c.job.job_id == job.job_id]
    assert mine[0].old is None and mine[0].became is JobStatus.QUEUED
    assert mine[-1].became is JobStatus.CANCELLED and mine[-1].old is not None
    sequences = [int(c.sequence) for c in mine]
    assert sequences == sorted(set(sequences))  # in stream order, none twice


def test_the_handler_reports_the_record_a_consumer_failed_on(
    monkeypatch: Any, svc: JobServices
) -> None:
    """Checkpoint semantics: the failed record is named, the ones before it are delivered
    (to the consumer that failed too, one by one), the ones after it are left for the retry."""

    def record(sequence: int, sk: str) -> dict[str, Any]:
        return {
            "eventSource": "aws:dynamodb",
            "dynamodb": {
                "SequenceNumber": str(sequence),
                "Keys": {"pk": {"S": "TENANT#t"}, "sk": {"S": sk}},
                "NewImage": None,
            },
        }

    records = [record(100, "JOB#a"), record(101, "IDEM#x"), record(102, "JOB#b")]
    records += [record(103, "JOB#poison"), record(104, "JOB#c")]

    class Picky:
        name = "picky"

        def __init__(self) -> None:
            self.got: list[str] = []

        def handle(self, changes: Any) -> None:
            sequences = [c.sequence for c in changes]
            if "103" in sequences:
                raise RuntimeError("cannot take job poison")
            self.got += sequences

    picky, steady = Picky(), Recorder()
    monkeypatch.setattr(job_changes_handler, "consumers", lambda: [steady, picky])
    answer = job_changes_handler.handler({"Records": records}, None)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "103"}]}
    assert picky.got == ["100", "102"]  # delivered up to the record it failed on
    assert [c.sequence for c in steady.changes] == ["100", "102", "103", "104"]
    # A record that cannot be read is the failure, wherever it is in the batch.
    damaged = {"dynamodb": {"SequenceNumber": "105", "Keys": {"sk": {"S": "JOB#d"}}}}
    damaged["dynamodb"]["NewImage"] = {"status": {"S": "melted"}}
    monkeypatch.setattr(job_changes_handler, "consumers", lambda: [steady])
    answer = job_changes_handler.handler({"Records": [records[0], damaged, records[4]]}, None)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "105"}]}
    assert [c.sequence for c in steady.changes][-1] == "100"
    assert job_changes_handler.handler({"Records": records[:2]}, None) == {"batchItemFailures": []}


def _stream_records(table: str) -> list[dict[str, Any]]:
    from tests.conftest import aws_client

    db, streams = aws_client("dynamodb"), aws_client("dynamodbstreams")
    arn = db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator)["Records"]
    for record in records:  # as the event source mapping hands them to the function
        when = record["dynamodb"]["ApproximateCreationDateTime"]
        record["dynamodb"]["ApproximateCreationDateTime"] = when.timestamp()
    return records


def test_a_finished_jobs_change_says_whether_it_may_have_dependants(
    svc: JobServices, provisioned: Provisioned
) -> None:
    alone = submit_job(svc, "t", REQUEST).job
    parent = submit_job(svc, "t", REQUEST).job
    child_request = REQUEST.model_copy(update={"depends_on": [parent.job_id]})
    child = submit_job(svc, "t", child_request).job
    for job in (alone, parent):
        svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))

    ended = {
        c.job.job_id: c.may_have_dependants
        for c in job_changes(_stream_records(provisioned.jobs_table))
        if c.became is JobStatus.CANCELLED
    }
    assert ended == {alone.job_id: False, parent.job_id: True}
    # And the reader's dependants consumer still settles the child from its parent's change.
    changes = job_changes(_stream_records(provisioned.jobs_table))
    assert deliver(changes, [DependencyRelease(svc.lifecycle)]) == []
    assert svc.store.get("t", child.job_id).status is JobStatus.CANCELLED
