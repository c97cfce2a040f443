"""A job's max_cost_usd as browser-seconds: priced where the job is made, held by the worker
over all its attempts, refused at submit when it cannot pay for a start."""

from __future__ import annotations

import math

import pytest

from browser_task.errors import FailJob
from browser_task.run.spend import nothing_left
from devstack.fakes import fake_services
from pagefleet.errors import InvalidField
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import AttemptRecord
from pagefleet.jobs.service import submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission
from pagefleet.pricing import Worker
from pagefleet.tenancy.spend import cost_usd, job_cost_cap

STEPS = [{"action": "goto", "url": "https://example.com/"}]


def test_the_cap_buys_the_browser_time_that_costs_max_cost_usd() -> None:
    worker = Worker()
    cap = job_cost_cap(0.01, worker)
    assert math.isclose(cost_usd(cap.seconds, worker), 0.01, rel_tol=1e-3)
    # A second attempt pays its fixed share out of the same seconds.
    second = cost_usd(cap.seconds - cap.attempt_s, worker, attempts=2)
    assert cap.attempt_s > 0 and math.isclose(second, 0.01, rel_tol=1e-3)
    # A bigger task burns the cap sooner.
    assert job_cost_cap(0.01, Worker(vcpu=4, memory_gb=8)).seconds < cap.seconds


def test_a_cap_that_cannot_pay_for_a_start_is_refused_at_submit_naming_the_field() -> None:
    floor = cost_usd(0.0, Worker())
    svc = fake_services()
    with pytest.raises(InvalidField) as refused:
        submit_job(svc, "t1", JobRequest.model_validate({"steps": STEPS, "max_cost_usd": floor}))
    assert refused.value.field == "max_cost_usd" and "running a job" in str(refused.value)
    with pytest.raises(ValueError, match="max_cost_usd"):
        JobRequest.model_validate({"steps": STEPS, "max_cost_usd": 0})
    made = submit_job(svc, "t1", JobRequest.model_validate({"steps": STEPS, "max_cost_usd": 1}))
    assert made.job.request.cost_cap == job_cost_cap(1, Worker())
    # A client cannot give the priced cap itself: it is worked out from max_cost_usd.
    with pytest.raises(ValueError, match="cost_cap"):
        JobSubmission.model_validate({"steps": STEPS, "cost_cap": {"seconds": 9e9}})
    given = JobRequest.model_validate({"steps": STEPS, "cost_cap": made.job.request.cost_cap})
    assert submit_job(svc, "t1", given).job.request.cost_cap is None


def test_an_attempt_gets_what_the_attempts_before_it_left() -> None:
    svc = fake_services()
    request = JobRequest.model_validate({"steps": STEPS, "max_cost_usd": 0.01})
    job = submit_job(svc, "t1", request).job
    cap = job.request.cost_cap
    assert cap is not None and job.spend_left_s() == cap.seconds
    ran = AttemptRecord(
        attempt=1,
        worker="w",
        started_at="2026-12-05T10:00:00.000Z",
        finished_at="2026-12-05T10:00:40.000Z",
        status=JobStatus.RETRY_SCHEDULED,
    )
    died = ran.model_copy(update={"attempt": 2, "finished_at": None})
    second = job.model_copy(update={"attempt": 3, "attempts": [ran, died]})
    assert second.spend_left_s() == pytest.approx(cap.seconds - 2 * cap.attempt_s - 40)
    spent = job.model_copy(
        update={
            "attempt": 2,
            "attempts": [ran.model_copy(update={"finished_at": "2026-12-05T12:00:00.000Z"})],
        }
    )
    assert spent.spend_left_s() < 0
    failure = nothing_left(spent)
    assert isinstance(failure, FailJob) and failure.kind == "cost_cap_reached"
    # A job without a cap is never stopped for its cost.
    plain = submit_job(svc, "t1", JobRequest.model_validate({"steps": STEPS})).job
    assert plain.spend_left_s() == math.inf
