"""Deleting a running job on in-memory fakes: it is stopped first, and a job the retention
consumer erases while the API waits for the stop reads as deleted, never as a 404."""

from __future__ import annotations

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.tenancy.retention import delete_job
from tests.unit.test_lifecycle import run_once


class RecordedData:
    """The job-data port: what was asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def delete_artifacts(self, tenant_id: str, job_id: str) -> int:
        self.asked.append("artifacts")
        return 0

    def delete_items(self, tenant_id: str, job_id: str, idempotency_key: str | None) -> int:
        self.asked.append("items")
        return 1

    def request_delete(self, tenant_id: str, job_id: str, at: str) -> None:
        self.asked.append("request_delete")

    def set_expiry(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("not asked on a delete")

    def clear_expiry(self, tenant_id: str, job_id: str) -> None:
        raise AssertionError("not asked on a delete")


def running_job(svc: JobServices) -> str:
    job = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
    submitted = submit_job(svc, "t1", job, idempotency_key=None)
    running, _ = run_once(svc)
    assert running.job_id == submitted.job.job_id and running.status is JobStatus.RUNNING
    return running.job_id


def test_a_running_job_erased_while_the_api_waits_reads_as_deleted(svc: JobServices) -> None:
    job_id = running_job(svc)
    data = RecordedData()

    def consumer_erases(_seconds: float) -> None:
        # The worker stopped it and the retention consumer erased it, between two polls.
        svc.store._rows.pop(("t1", job_id))  # type: ignore[attr-defined]

    deletion = delete_job(svc, data, "t1", job_id, wait_s=5, sleep=consumer_erases)
    assert deletion.status == "deleted"
    assert data.asked == ["request_delete", "artifacts"]


def test_a_running_job_that_does_not_stop_in_time_is_left_to_the_consumer(
    svc: JobServices,
) -> None:
    job_id = running_job(svc)
    data = RecordedData()
    deletion = delete_job(svc, data, "t1", job_id, wait_s=1, sleep=lambda _s: None)
    assert deletion.status == "deleting"
    assert data.asked == ["request_delete"]
    assert svc.store.get("t1", job_id).cancel_requested_at is not None
