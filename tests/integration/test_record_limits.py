"""No job record outgrows a DynamoDB item: the outcome write of a big job always lands."""

from __future__ import annotations

import json

from pagefleet.api.jobs import JobView
from pagefleet.jobs import record_size
from pagefleet.jobs.lifecycle import Outcome, Then
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus

TENANT = "tenant-big"


def claimed(svc: JobServices, request: dict[str, object]) -> tuple[JobRecord, ReceivedMessage]:
    job = submit_job(svc, TENANT, JobRequest.model_validate(request)).job
    [received] = svc.queue.receive(job.pool, max_messages=1, wait_seconds=0, visibility=60)
    step = svc.lifecycle.claim(received, job.pool, owner="w1", lease_seconds=60, worker="w1")
    assert step.then is Then.RUN and step.job is not None
    return step.job, received


def big_request() -> dict[str, object]:
    # ~200 KB of request: with a 250 KB result the record would pass 400 KB.
    return {
        "steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}],
        "inputs": {"blob": "x" * 200_000},
    }


def test_a_result_too_big_for_the_record_stays_in_data_json(svc: JobServices) -> None:
    job, _ = claimed(svc, big_request())
    result = {"rows": ["é" * 100] * 1_250}  # 250 KB of UTF-8
    data = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()
    artifact = svc.artifacts.put(
        tenant_id=TENANT,
        job_id=job.job_id,
        attempt=job.attempt,
        name="data.json",
        data=data,
        content_type="application/json",
    )
    outcome = Outcome(JobStatus.SUCCEEDED, result=result, artifacts=[artifact])
    step = svc.lifecycle.finish(job, outcome, "w1")
    assert step.status is JobStatus.SUCCEEDED, step.reason

    done = svc.store.get(TENANT, job.job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.result is None
    assert done.result_artifact == "data.json"
    assert done.result_bytes == len(data)
    assert json.loads(svc.artifacts.get(done.artifacts[0].key)) == result
    view = JobView.of(done)
    assert view.result is None and view.result_artifact == "data.json"


def test_a_small_result_stays_inline(svc: JobServices) -> None:
    job, _ = claimed(svc, big_request())
    outcome = Outcome(JobStatus.SUCCEEDED, result={"title": "ok"})
    svc.lifecycle.finish(job, outcome, "w1")
    done = svc.store.get(TENANT, job.job_id)
    assert done.result == {"title": "ok"}
    assert done.result_artifact is None
    assert done.result_bytes == len('{"title":"ok"}')


def test_a_huge_error_message_is_cut_and_the_failure_recorded(svc: JobServices) -> None:
    job, _ = claimed(svc, big_request())
    error = JobError(kind="step_failed", message="boom " * 100_000, step="click(" + "#" * 50_000)
    partial = {"rows": ["x" * 1_000] * 300}  # a failed run's partial result: no data.json
    outcome = Outcome(JobStatus.FAILED, result=partial, error=error)
    step = svc.lifecycle.finish(job, outcome, "w1")
    assert step.status is JobStatus.FAILED, step.reason
    done = svc.store.get(TENANT, job.job_id)
    assert done.error is not None
    assert done.error.message.startswith("boom boom")
    assert len(done.error.message.encode()) <= record_size.ERROR_MESSAGE_MAX_BYTES
    assert done.attempts[-1].error == done.error
    assert done.result is None and done.result_artifact is None
    assert done.result_bytes is not None and done.result_bytes > 300_000
