"""A new item's put whose reply is lost: botocore sends it again, it finds its own item, and
the write is done (not a conflict, not a 500). Found by the chaos bench: POST /v1/schedules
answered 500 for a schedule it had stored, and the client's retry stored a second one."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.adapters.dynamodb.schedules import DynamoScheduleStore
from pagefleet.adapters.faults import FaultInjector
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.schedules.service import Schedule

STAMP = "2026-12-01T10:00:00Z"
JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}


def _losing_replies() -> object:
    """A DynamoDB client of its own whose every call is applied, then its reply lost once."""
    import boto3

    client = boto3.session.Session().client("dynamodb")
    FaultInjector(rate=1.0, lost_reply_share=1.0).attach(client)
    return client


def _schedule(schedule_id: str, name: str = "nightly") -> Schedule:
    return Schedule(
        schedule_id=schedule_id,
        tenant_id="alice",
        name=name,
        expression="rate(1 hour)",
        job=JOB,
        created_at=STAMP,
        updated_at=STAMP,
    )


def _job(job_id: str, **request: object) -> JobRecord:
    return JobRecord(
        tenant_id="alice",
        job_id=job_id,
        status=JobStatus.WAITING if request.get("depends_on") else JobStatus.QUEUED,
        request=JobRequest.model_validate({**JOB, **request}),
        created_at=STAMP,
        updated_at=STAMP,
        correlation_id="c-1",
        pool="standard",
    )


def test_a_schedule_whose_put_reply_was_lost_is_stored_once(provisioned: Provisioned) -> None:
    store = DynamoScheduleStore(_losing_replies(), provisioned.jobs_table)  # type: ignore[arg-type]
    store.create(_schedule("01J00000000000000000000001"))
    assert [s.name for s in store.list_for("alice")] == ["nightly"]
    # Another schedule under the same id is still refused.
    plain = DynamoScheduleStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    with pytest.raises(ClientError):
        plain.create(_schedule("01J00000000000000000000001", name="other"))


def test_a_job_whose_put_reply_was_lost_is_stored_once(provisioned: Provisioned) -> None:
    store = DynamoJobStore(_losing_replies(), provisioned.jobs_table)  # type: ignore[arg-type]
    record = JobRecord(
        tenant_id="alice",
        job_id="01j00000000000000000000002",
        status=JobStatus.QUEUED,
        request=JobRequest.model_validate(JOB),
        created_at=STAMP,
        updated_at=STAMP,
        correlation_id="c-1",
        pool="standard",
    )
    store.create(record)
    assert store.get("alice", record.job_id).status is JobStatus.QUEUED


def test_a_child_whose_transaction_reply_was_lost_is_stored_once(
    provisioned: Provisioned,
) -> None:
    """A job with parents and no Idempotency-Key is one transaction (the job and its edges)."""
    plain = DynamoJobStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    parent = _job("01j00000000000000000000003")
    plain.create(parent)
    child = _job("01j00000000000000000000004", depends_on=[parent.job_id])
    DynamoJobStore(_losing_replies(), provisioned.jobs_table).create(child)  # type: ignore[arg-type]
    assert plain.get("alice", child.job_id).status is JobStatus.WAITING
    assert plain.dependants("alice", parent.job_id) == [child.job_id]
