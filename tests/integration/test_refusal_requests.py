"""What a refused job move costs in DynamoDB requests, on the moto server with the real
adapter: the refusal is named from the record as its condition saw it, with no read after."""

from __future__ import annotations

import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.errors import IllegalTransition, NotFound
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobMessage
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME

NOW = 2_000_000_000


def test_a_refused_claim_and_a_missing_job_cost_one_request_each(
    svc: JobServices, provisioned: Provisioned
) -> None:
    db = RUNTIME.client("dynamodb")
    store = DynamoJobStore(db, provisioned.jobs_table)
    request = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://x/"}]})
    job = submit_job(svc, "t", request).job
    claimed = store.claim(
        job.tenant_id, job.job_id, owner="w1", lease_until=NOW + 60, now=NOW, started_at="s"
    )
    assert claimed.status is JobStatus.RUNNING
    calls: list[str] = []

    def count(model: object, **_: object) -> None:
        calls.append(str(getattr(model, "name", "?")))

    db.meta.events.register("before-call.dynamodb", count)
    try:
        # A copy of its message, while its lease is live: refused, and why is named.
        with pytest.raises(IllegalTransition) as refused:
            store.claim(
                job.tenant_id, job.job_id, owner="w2", lease_until=NOW + 60, now=NOW, started_at="s"
            )
        assert refused.value.details.get("status") == "running"
        assert calls == ["UpdateItem"]
        calls.clear()
        with pytest.raises(NotFound):
            store.extend_lease(job.tenant_id, "missing", attempt=1, owner="w1", lease_until=NOW)
        assert calls == ["UpdateItem"]
    finally:
        db.meta.events.unregister("before-call.dynamodb", count)


def test_a_copy_of_a_running_jobs_message_costs_the_claim_alone(
    svc: JobServices, provisioned: Provisioned
) -> None:
    """SQS delivers some messages twice: a copy that meets its job running elsewhere is
    dropped on what the refused claim saw (no read of the job after it)."""
    request = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://x/"}]})
    job = submit_job(svc, "t", request).job
    [first] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=1)
    kept = svc.lifecycle.claim(first, "standard", owner="w1/a", lease_seconds=60, worker="w1")
    assert kept.job is not None and kept.job.job_id == job.job_id
    svc.queue.send(JobMessage.for_job(kept.job))  # the copy SQS may deliver
    [copy] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=30)
    db = RUNTIME.client("dynamodb")
    jobs_table: list[str] = []

    def count(model: object, params: dict[str, object], **_: object) -> None:
        if params.get("TableName") == provisioned.jobs_table:
            jobs_table.append(str(getattr(model, "name", "?")))

    db.meta.events.register("before-parameter-build.dynamodb", count)
    try:
        answer = svc.lifecycle.claim(copy, "standard", owner="w2/b", lease_seconds=60, worker="w2")
    finally:
        db.meta.events.unregister("before-parameter-build.dynamodb", count)
    assert answer.job is None and "running elsewhere" in answer.reason
    assert jobs_table == ["UpdateItem"]
