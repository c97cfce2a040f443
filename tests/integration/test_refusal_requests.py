"""What a refused job move costs in DynamoDB requests, on the moto server with the real
adapter: the refusal is named from the record as its condition saw it, with no read after."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.errors import IllegalTransition, NotFound
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.moves import MessageAnswer
from pagefleet.jobs.record import JobMessage
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME

NOW = 2_000_000_000
T = TypeVar("T")


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
    jobs_table, answer = _jobs_table_calls(
        provisioned,
        lambda: svc.lifecycle.claim(copy, "standard", owner="w2/b", lease_seconds=60, worker="w2"),
    )
    assert answer.job is None and "running elsewhere" in answer.reason
    assert jobs_table == ["UpdateItem"]


def _jobs_table_calls(provisioned: Provisioned, work: Callable[[], T]) -> tuple[list[str], T]:
    """The requests ``work()`` made of the jobs table, by operation, and what it returned."""
    db = RUNTIME.client("dynamodb")
    calls: list[str] = []

    def count(model: object, params: dict[str, object], **_: object) -> None:
        if params.get("TableName") == provisioned.jobs_table:
            calls.append(str(getattr(model, "name", "?")))

    db.meta.events.register("before-parameter-build.dynamodb", count)
    try:
        result = work()
    finally:
        db.meta.events.unregister("before-parameter-build.dynamodb", count)
    return calls, result


def test_a_jobs_look_before_its_claim_reads_its_message_not_its_record(
    svc: JobServices, provisioned: Provisioned
) -> None:
    """The message carries what the worker needs before the claim (pagefleet.jobs.preview):
    the look and the claim are one request to the jobs table, and the message names no URL
    path and no input."""
    request = JobRequest.model_validate(
        {
            "steps": [{"action": "goto", "url": "https://shop.test/orders/{{inputs.order}}"}],
            "inputs": {"order": "order-4711"},
            "options": {"locale": "de-DE"},
        }
    )
    job = submit_job(svc, "t", request).job
    sqs = RUNTIME.client("sqs")
    url = provisioned.queue_urls["standard"]
    [raw] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
    assert "order-4711" not in raw["Body"] and "/orders/" not in raw["Body"]
    [received] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=30)

    def look_and_claim() -> tuple[MessageAnswer, MessageAnswer]:
        look = svc.lifecycle.peek(received, "standard")
        claim = svc.lifecycle.claim(
            received, "standard", owner="w1/a", lease_seconds=60, worker="w1"
        )
        return look, claim

    calls, (look, claimed) = _jobs_table_calls(provisioned, look_and_claim)
    assert calls == ["UpdateItem"]
    assert look.preview is not None and look.preview.options is not None
    assert look.preview.origin == "https://shop.test:443"
    assert look.preview.options.locale == "de-DE"
    assert claimed.job is not None and claimed.job.job_id == job.job_id


def test_a_job_whose_options_carry_headers_is_looked_at_in_its_record(
    svc: JobServices, provisioned: Provisioned
) -> None:
    """A header may hold a token: such a job's message carries no preview, and its worker
    reads the record (eventually consistent) before the claim, as every job did before."""
    request = JobRequest.model_validate(
        {
            "steps": [{"action": "goto", "url": "https://shop.test/"}],
            "options": {"extra_headers": {"Authorization": "Bearer literal-token"}},
        }
    )
    submit_job(svc, "t", request)
    [received] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=30)
    assert received.message is not None and received.message.preview is None
    calls, look = _jobs_table_calls(provisioned, lambda: svc.lifecycle.peek(received, "standard"))
    assert calls == ["GetItem"]
    assert look.preview is not None and look.preview.options is not None
    assert look.preview.options.extra_headers == {"Authorization": "Bearer literal-token"}
