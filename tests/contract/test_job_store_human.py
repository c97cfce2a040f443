"""A job waiting for a person in the store (fake and DynamoDB alike): parked and resumed only
by the attempt holding it, its lease kept by heartbeats while it waits, continued only by
its own tenant while it waits, never ended as succeeded from the wait, and sent to review
(not retried) when its worker stops heartbeating."""

from __future__ import annotations

import time

import pytest

from pagefleet.errors import IllegalTransition, JobNotWaiting, LeaseLost, NotFound
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.record import AttemptRecord, JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus

REQUEST = JobRequest.model_validate(
    {
        "steps": [
            {"action": "goto", "url": "http://127.0.0.1:9/login"},
            {"action": "await_human", "prompt": "Type the code we sent you", "timeout_s": 600},
            {"action": "click", "selector": "#go"},
        ]
    }
)


def _claimed(svc: JobServices, owner: str = "w1", *, lease_s: int = 60) -> JobRecord:
    job = submit_job(svc, "t", REQUEST).job
    now = int(time.time())
    return svc.store.claim(
        "t", job.job_id, owner=owner, lease_until=now + lease_s, now=now, started_at=iso(utcnow())
    )


def _parked(svc: JobServices) -> JobRecord:
    job = _claimed(svc)
    return svc.lifecycle.park(job, prompt="Type the code we sent you", step_index=1, timeout_s=600)


def test_only_the_attempt_holding_the_job_parks_it_and_its_lease_is_kept_while_it_waits(
    svc: JobServices,
) -> None:
    job = _claimed(svc)
    stale = job.model_copy(update={"lease_owner": "someone-else"})
    with pytest.raises(LeaseLost):
        svc.lifecycle.park(stale, prompt="p", step_index=1, timeout_s=60)
    parked = svc.lifecycle.park(job, prompt="Type the code", step_index=1, timeout_s=600)
    assert parked.status is JobStatus.WAITING_FOR_HUMAN
    read = svc.store.get("t", job.job_id)
    assert read.status is JobStatus.WAITING_FOR_HUMAN and read.human is not None
    assert read.human.prompt == "Type the code" and read.human.step_index == 1
    assert read.human.continued_at is None
    # The worker's heartbeat goes on while the job waits (its lease is what proves it alive).
    svc.lifecycle.heartbeat(read, lease_seconds=120)
    assert (svc.store.get("t", job.job_id).lease_expires_at or 0) > (read.lease_expires_at or 0)
    assert svc.store.get("t", job.job_id).status is JobStatus.WAITING_FOR_HUMAN


def test_a_waiting_job_is_never_claimed_nor_succeeds_without_running_again(
    svc: JobServices,
) -> None:
    job = _parked(svc)
    now = int(time.time()) + 3600  # even past its lease: only its own worker resumes it
    with pytest.raises(IllegalTransition):
        svc.store.claim(
            "t", job.job_id, owner="w2", lease_until=now + 60, now=now, started_at=iso(utcnow())
        )
    history = AttemptRecord(attempt=job.attempt, worker="w1", started_at=job.started_at or "")
    with pytest.raises((LeaseLost, IllegalTransition)):
        svc.store.finish(
            "t",
            job.job_id,
            attempt=job.attempt,
            owner="w1",
            status=JobStatus.SUCCEEDED,
            at=iso(utcnow()),
            result={},
            artifacts=[],
            error=None,
            history=history,
        )
    assert svc.store.get("t", job.job_id).status is JobStatus.WAITING_FOR_HUMAN


def test_the_owner_continues_it_once_and_the_holder_resumes_it(svc: JobServices) -> None:
    job = _parked(svc)
    with pytest.raises(NotFound):  # another tenant does not see it, so cannot answer it
        svc.lifecycle.continue_waiting("other-tenant", job.job_id, note="mine now")
    answered = svc.lifecycle.continue_waiting("t", job.job_id, note="typed 123456")
    assert answered.status is JobStatus.WAITING_FOR_HUMAN  # the worker moves it on
    assert answered.human is not None and answered.human.continued_at is not None
    assert answered.human.note == "typed 123456"
    again = svc.lifecycle.continue_waiting("t", job.job_id, note="twice")
    assert again.human is not None and again.human.note == "typed 123456"  # the first answer
    stale = job.model_copy(update={"attempt": job.attempt + 1})
    with pytest.raises(LeaseLost):
        svc.lifecycle.resume(stale)
    resumed = svc.lifecycle.resume(job)
    assert resumed is not None and resumed.status is JobStatus.RUNNING
    with pytest.raises(JobNotWaiting):  # running again: nothing to continue
        svc.lifecycle.continue_waiting("t", job.job_id, note=None)


def test_a_parked_job_whose_worker_stopped_goes_to_review_never_to_a_retry(
    svc: JobServices,
) -> None:
    job = _parked(svc)
    assert svc.lifecycle.take_back("t", job.job_id, expired_before=0) == "alive"
    far = int(time.time()) + 3600  # as if its lease ran out an hour ago
    assert svc.lifecycle.take_back("t", job.job_id, expired_before=far) == "needs_review"
    read = svc.store.get("t", job.job_id)
    assert read.status is JobStatus.NEEDS_REVIEW and read.attempt == job.attempt
    assert read.error is not None and read.error.kind == "needs_review"
    assert "waited for a person" in read.error.message and read.error.step_index == 1
    with pytest.raises(LeaseLost):  # its worker, back from a pause, cannot resume it
        svc.lifecycle.resume(job)
