"""Irreversible steps on the in-memory fakes: what the lifecycle does with a job whose
attempt reached such a step, whoever notices how it ended (the worker, a reclaim, the
sweeper, the dead-letter queue, a person)."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.fakes import FakeClock, FakeQueue
from pagefleet.errors import JobNotInReview, LeaseLost, NotFound
from pagefleet.jobs.checkpoints import Checkpoint, Compensation
from pagefleet.jobs.lifecycle import Outcome, Then
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.rules import LEASE_GRACE_S, Resume, resume_plan
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.sweeper import sweep, take_back_expired
from tests.unit.test_lifecycle import HIGH, LEASE, POOL, claim, run_once

SITE = "http://127.0.0.1:9"
CHECK = [
    {"action": "goto", "url": SITE + "/orders?ref={{job.id}}"},
    {"action": "assert", "selector": ".order", "visible": True},
]


def order_request(*, check: bool, **extra: Any) -> JobRequest:
    """Open the form, place the order (irreversible), read the confirmation."""
    place: dict[str, Any] = {"action": "click", "selector": "#place", "irreversible": True}
    if check:
        place["check"] = CHECK
    return JobRequest.model_validate(
        {
            "steps": [
                {"action": "goto", "url": SITE + "/order"},
                {**place, "label": "Place order"},
                {"action": "extract", "name": "order", "selector": "#number"},
            ],
            **extra,
        }
    )


def at_step(job: JobRecord, state: str = "started", *, how: str = "ran") -> list[Checkpoint]:
    return [
        Checkpoint.model_validate(
            {
                "step": 1,
                "label": "Place order",
                "state": state,
                "attempt": job.attempt,
                "at": "2027-01-15T08:00:00.000Z",
                "how": how,
            }
        )
    ]


def started(svc: JobServices, *, check: bool, **extra: Any) -> tuple[JobRecord, ReceivedMessage]:
    """A job whose worker wrote "started" before its order click, and holds it still."""
    submit_job(svc, "t", order_request(check=check, **extra))
    job, received = run_once(svc)
    svc.lifecycle.record_progress(job, at_step(job), result={"before": 1})
    return svc.store.get("t", job.job_id), received


def timeout() -> JobError:
    return JobError(kind="timeout", message="the job ran longer than 30 s", timeout="job")


def lose_the_worker(svc: JobServices, queue: FakeQueue, clock: FakeClock) -> ReceivedMessage | None:
    """The worker died: its lease runs out and the job is taken back. Its retry's message
    (sent ahead of the queue) when a check can tell, else None: it went to review."""
    clock.advance(LEASE + LEASE_GRACE_S + 1)
    take_back_expired(svc, now=int(clock.now()))
    back = queue.receive(HIGH, max_messages=1, wait_seconds=0, visibility=LEASE)
    return back[0] if back else None


def reclaim(svc: JobServices, back: ReceivedMessage | None, owner: str) -> Any:
    assert back is not None, "no retry was sent"
    return claim(svc, back, owner)


# --- the rule -----------------------------------------------------------------------------
def test_the_next_attempt_checks_a_started_step_or_stops_in_review(svc: JobServices) -> None:
    checked, _ = started(svc, check=True)
    assert resume_plan(checked).resume is Resume.CHECK
    blind = svc.store.get("t", started(svc, check=False)[0].job_id)
    plan = resume_plan(blind)
    assert plan.resume is Resume.REVIEW
    assert "step 1 (Place order) started on attempt 1" in plan.why
    assert "no check" in plan.why


def test_a_step_settled_not_done_lets_the_job_start_over_and_a_person_is_trusted(
    svc: JobServices,
) -> None:
    job, _ = started(svc, check=False)
    assert resume_plan(job, at_step(job, "not_done", how="checked")).resume is Resume.START
    assert resume_plan(job, at_step(job, "done", how="resolved")).resume is Resume.CONTINUE
    assert resume_plan(job, at_step(job, "unknown", how="checked")).resume is Resume.REVIEW


def test_a_compensation_that_started_is_never_run_again(svc: JobServices) -> None:
    job, _ = started(svc, check=True)
    began = Compensation(state="started", attempt=1, at="2027-01-15T08:00:01Z", reason="x")
    assert resume_plan(job.model_copy(update={"compensation": began})).resume is Resume.REVIEW
    done = began.model_copy(update={"state": "done"})
    compensated = resume_plan(job.model_copy(update={"compensation": done}))
    assert compensated.resume is Resume.COMPENSATED and compensated.why == "x"


# --- the worker's own failure ----------------------------------------------------------------
def test_a_timeout_after_the_step_started_is_checked_next_time_or_reviewed(
    svc: JobServices,
) -> None:
    job, _ = started(svc, check=True)
    retry = svc.lifecycle.after_failure(job, timeout(), checkpoints=job.checkpoints)
    assert retry.status is JobStatus.RETRY_SCHEDULED
    blind, _ = started(svc, check=False)
    review = svc.lifecycle.after_failure(blind, timeout(), checkpoints=blind.checkpoints)
    assert review.status is JobStatus.NEEDS_REVIEW
    assert review.error is not None and review.error.kind == "needs_review"
    assert review.error.step_index == 1 and review.error.timeout == "job"
    assert "/resolve" in review.error.message
    assert review.checkpoints is not None and review.checkpoints[0].state == "unknown"


def test_a_permanent_failure_after_the_step_took_effect_fails_the_job(svc: JobServices) -> None:
    job, _ = started(svc, check=True)
    wrong = JobError(kind="assertion_failed", message="total is not 12.00")
    outcome = svc.lifecycle.after_failure(job, wrong, checkpoints=at_step(job, "done"))
    assert outcome.status is JobStatus.FAILED  # and its compensate steps run


def test_with_no_attempt_left_even_a_checked_step_goes_to_review(svc: JobServices) -> None:
    job, _ = started(svc, check=True, max_attempts=1)
    outcome = svc.lifecycle.after_failure(job, timeout(), checkpoints=job.checkpoints)
    assert outcome.status is JobStatus.NEEDS_REVIEW
    assert outcome.error is not None and "max_attempts (1) is spent" in outcome.error.message


def test_before_any_irreversible_step_a_failure_is_retried_as_always(svc: JobServices) -> None:
    submit_job(svc, "t", order_request(check=False))
    job, _ = run_once(svc)
    reset = JobError(kind="navigation_failed", message="reset", retryable=True)
    assert svc.lifecycle.after_failure(job, reset).status is JobStatus.RETRY_SCHEDULED


def test_a_checkpoint_is_fenced_by_the_attempt(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job, _ = started(svc, check=True)
    back = lose_the_worker(svc, queue, clock)
    newer = reclaim(svc, back, "w2")
    assert newer.then is Then.RUN  # a check: the new attempt runs it first
    with pytest.raises(LeaseLost):  # the old worker wakes up: it must not run the step
        svc.lifecycle.record_progress(job, at_step(job, "done"))
    assert svc.store.get("t", job.job_id).checkpoints[0].state == "started"


# --- a lost run ------------------------------------------------------------------------------
def test_a_dead_workers_job_without_a_check_stops_in_review_without_running(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job, _ = started(svc, check=False)
    assert lose_the_worker(svc, queue, clock) is None  # nothing sent: never run again
    record = svc.store.get("t", job.job_id)
    assert record.status is JobStatus.NEEDS_REVIEW
    assert record.checkpoints[0].state == "unknown"
    assert record.result == {"before": 1}  # the results it had when the step started
    assert queue.depth(POOL) == 0  # never retried automatically


def test_the_sweeper_takes_back_a_dead_workers_job_to_its_check_or_to_review(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    checked, first = started(svc, check=True)
    blind, second = started(svc, check=False)
    for received in (first, second):
        queue.delete(POOL, received.receipt_handle)  # only the lease says it was lost
    clock.advance(LEASE + LEASE_GRACE_S + 1)
    report = sweep(svc)
    assert (report.leases_recovered, report.leases_to_review) == (1, 1)
    assert svc.store.get("t", checked.job_id).status is JobStatus.RETRY_SCHEDULED
    assert svc.store.get("t", blind.job_id).status is JobStatus.NEEDS_REVIEW
    assert [m.job_id for m in queue.visible(HIGH)] == [checked.job_id]


def test_a_dead_letter_of_a_started_step_goes_to_review_not_to_a_blind_redrive(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job, _ = started(svc, check=True)
    back = lose_the_worker(svc, queue, clock)
    assert back is not None and svc.lifecycle.dead_letter(back) == "needs_review"
    record = svc.store.get("t", job.job_id)
    assert record.status is JobStatus.NEEDS_REVIEW and record.error is not None
    assert "dead-letter queue" in record.error.message


# --- a person resolves it --------------------------------------------------------------------
def review(svc: JobServices, queue: FakeQueue, clock: FakeClock, **extra: Any) -> JobRecord:
    job, _ = started(svc, check=False, **extra)
    assert lose_the_worker(svc, queue, clock) is None
    return svc.store.get("t", job.job_id)


def test_resolved_done_the_job_succeeds_with_what_it_has(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job = review(svc, queue, clock)
    done = svc.lifecycle.resolve("t", job.job_id, "done", by="t:key1")
    assert done.status is JobStatus.SUCCEEDED and done.result == {"before": 1}
    assert done.error is None and done.finished_at is not None
    assert (done.checkpoints[0].state, done.checkpoints[0].how) == ("done", "resolved")
    assert done.resolution is not None and done.resolution.skipped == [2]
    assert done.resolution.by == "t:key1"
    assert queue.depth(POOL) == 0


def test_a_job_in_review_past_its_retention_is_not_found_to_resolve(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    """Gone, whether or not TTL has deleted it: its artifacts may be gone already."""
    job = review(svc, queue, clock)
    # The expiry the retention consumer wrote for the review (JobData), now passed.
    row = svc.store._rows[("t", job.job_id)]  # type: ignore[attr-defined]
    row.job = row.job.model_copy(update={"expires_at": int(clock.now())})
    with pytest.raises(NotFound):
        svc.lifecycle.resolve("t", job.job_id, "done", by="t:key1")
    assert svc.store.get("t", job.job_id).status is JobStatus.NEEDS_REVIEW


def test_resolved_done_and_continue_runs_only_the_steps_after_it(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job = review(svc, queue, clock, max_attempts=2)
    queued = svc.lifecycle.resolve("t", job.job_id, "done", go_on=True, by="t:key1")
    assert queued.status is JobStatus.QUEUED and queued.attempt_base == queued.attempt
    again, _ = run_once(svc, "w3")
    assert resume_plan(again).resume is Resume.CONTINUE  # from step 2, no click
    # A fresh budget: the continuation may be retried.
    reset = JobError(kind="navigation_failed", message="reset", retryable=True)
    assert svc.lifecycle.after_failure(again, reset).status is JobStatus.RETRY_SCHEDULED


def test_resolved_not_done_the_job_runs_again_from_the_start(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job = review(svc, queue, clock)
    svc.lifecycle.resolve("t", job.job_id, "not_done", by="t:key1")
    again, _ = run_once(svc, "w3")
    assert resume_plan(again).resume is Resume.START
    assert again.checkpoints[0].state == "not_done"


def test_only_a_job_in_review_can_be_resolved_and_the_409_names_its_state(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", order_request(check=False)).job
    with pytest.raises(JobNotInReview, match="is queued") as refused:
        svc.lifecycle.resolve("t", job.job_id, "done", by="t:key1")
    assert refused.value.details["status"] == "queued"


def test_a_job_in_review_can_be_cancelled(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job = review(svc, queue, clock)
    assert svc.lifecycle.cancel("t", job.job_id).status is JobStatus.CANCELLED


def test_a_job_in_review_holds_its_dependants_until_it_is_resolved(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    parent = review(svc, queue, clock)
    child = submit_job(svc, "t", order_request(check=False, depends_on=[parent.job_id])).job
    assert svc.lifecycle.settle_waiting("t", child.job_id) is None  # it waits
    done = svc.lifecycle.resolve("t", parent.job_id, "done", by="t:key1")
    svc.lifecycle.release_dependants(done)
    assert svc.store.get("t", child.job_id).status is JobStatus.QUEUED


def test_a_worker_outcome_of_review_keeps_the_job_out_of_the_sweepers_sight(
    svc: JobServices, clock: FakeClock
) -> None:
    job, _ = started(svc, check=False)
    outcome = svc.lifecycle.after_failure(job, timeout(), checkpoints=job.checkpoints)
    step = svc.lifecycle.finish(job, outcome, "w1")
    assert step.then is Then.DELETE and step.status is JobStatus.NEEDS_REVIEW
    clock.advance(10 * LEASE + LEASE_GRACE_S)
    report = sweep(svc)
    assert report.leases_recovered == report.leases_failed == report.leases_to_review == 0
    record = svc.store.get("t", job.job_id)
    assert record.status is JobStatus.NEEDS_REVIEW and record.checkpoints[0].state == "unknown"
    assert [a.status for a in record.attempts] == [JobStatus.NEEDS_REVIEW]


def test_an_outcome_carries_the_compensation_beside_the_checkpoints(svc: JobServices) -> None:
    job, _ = started(svc, check=True)
    compensation = Compensation(
        state="done", attempt=1, at="2027-01-15T08:00:02Z", reason="assertion failed"
    )
    failed = Outcome(
        JobStatus.FAILED,
        error=JobError(kind="assertion_failed", message="assertion failed"),
        checkpoints=at_step(job, "done"),
        compensation=compensation,
    )
    svc.lifecycle.finish(job, failed, "w1")
    record = svc.store.get("t", job.job_id)
    assert record.compensation == compensation and record.checkpoints[0].state == "done"


def test_review_gives_the_running_slot_back_and_a_new_run_counts_as_queued(
    clock: FakeClock,
) -> None:
    from devstack.fakes.tenancy import fake_tenancy
    from pagefleet.specs.tenant_defaults import LimitDefaults
    from pagefleet.tenancy import admission

    svc, tenancy = fake_tenancy(clock, defaults=LimitDefaults(max_running=1))
    counters = tenancy.quotas.counters

    def counts() -> tuple[int, frozenset[str]]:
        view = counters.view("t", now_ms=int(clock.now() * 1000))
        return view.queued, view.running

    job_id = admission.submit(
        svc, tenancy.quotas, "t", order_request(check=False)
    ).submitted.job.job_id
    job, _ = run_once(svc)
    svc.lifecycle.record_progress(job, at_step(job))
    assert counts() == (0, frozenset({job_id}))
    assert isinstance(svc.queue, FakeQueue)
    assert lose_the_worker(svc, svc.queue, clock) is None
    assert svc.store.get("t", job_id).status is JobStatus.NEEDS_REVIEW
    # Not running, not queued: the tenant's slot is free for its other jobs.
    assert counts() == (0, frozenset())
    svc.lifecycle.resolve("t", job_id, "not_done", by="t:key1")
    assert counts() == (1, frozenset())
    run_once(svc, "w3")
    assert counts() == (0, frozenset({job_id}))


def test_a_failed_compensation_and_one_its_worker_left_unfinished_go_to_review(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job, _ = started(svc, check=True)
    wrong = JobError(kind="assertion_failed", message="total is not 12.00")
    failed = svc.lifecycle.after_failure(job, wrong, checkpoints=at_step(job, "done"))
    broken = Compensation(
        state="failed", attempt=1, at="2027-01-15T08:00:02Z", reason="x", error="no #cancel"
    )
    reviewed = svc.lifecycle.compensated(job, failed, broken)
    assert reviewed.status is JobStatus.NEEDS_REVIEW and reviewed.compensation == broken
    assert (
        reviewed.error is not None and "compensation of attempt 1 failed" in reviewed.error.message
    )

    # A worker that died while compensating: the compensation is never run a second time.
    began = broken.model_copy(update={"state": "started", "error": None})
    svc.lifecycle.record_progress(job, at_step(job, "done"), compensation=began)
    assert lose_the_worker(svc, queue, clock) is None
    record = svc.store.get("t", job.job_id)
    assert record.status is JobStatus.NEEDS_REVIEW
    assert record.error is not None and "did not finish" in record.error.message
