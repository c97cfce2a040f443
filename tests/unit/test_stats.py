"""Fleet figures from the job records: counts now, rates and percentiles in the window."""

from __future__ import annotations

from devstack.fakes import FakeClock
from pagefleet.jobs import sweeper
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.record import JobError
from pagefleet.jobs.rules import LEASE_GRACE_S
from pagefleet.jobs.service import JobServices, fleet_stats, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission

STEPS = [{"action": "goto", "url": "http://127.0.0.1:9/"}]


def _run(svc: JobServices, clock: FakeClock, outcome: JobStatus, *, seconds: float) -> None:
    [received] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=60)
    step = svc.lifecycle.claim(received, "standard", owner="w", lease_seconds=60, worker="w")
    assert step.job is not None
    clock.advance(seconds)
    error = None if outcome is JobStatus.SUCCEEDED else JobError(kind="x", message="no")
    svc.lifecycle.finish(step.job, Outcome(outcome, error=error), "w")


def test_fleet_figures(svc: JobServices, clock: FakeClock) -> None:
    job = JobSubmission.model_validate({"steps": STEPS, "max_attempts": 1})
    for _ in range(3):
        submit_job(svc, "t", job)
        clock.advance(2)  # each waits 2 s in the queue, then runs 4 s
        _run(svc, clock, JobStatus.SUCCEEDED, seconds=4)
    submit_job(svc, "t", job)
    _run(svc, clock, JobStatus.FAILED, seconds=1)
    submit_job(svc, "t", job)  # still queued
    clock.advance(10)
    submit_job(svc, "t", JobSubmission.model_validate({"steps": STEPS, "delay_seconds": 600}))
    submit_job(svc, "other", job)

    figures = fleet_stats(svc, "t")
    assert figures.counts["queued"] == 1 and figures.counts["scheduled"] == 1
    assert figures.counts["running"] == 0
    assert figures.oldest_queued_age_s == 10
    assert figures.finished == {"succeeded": 3, "failed": 1}
    assert figures.success_rate == 0.75 and figures.failure_rate == 0.25
    assert figures.retry_rate == 0.0
    assert figures.duration_s.p50 == 4
    assert figures.queue_delay_s.p50 == 2
    assert figures.sampled == 6


def test_the_oldest_waiting_age_counts_waiting_jobs_never_running_ones(
    svc: JobServices, clock: FakeClock
) -> None:
    """Locally the queue age comes from the job records; it must mean what the queues' age
    means on AWS, where a claimed job's message is gone: a long run never ages the queue,
    a dead worker's job taken back waits again from then."""
    job = JobSubmission.model_validate({"steps": STEPS})
    submit_job(svc, "t", job)
    [received] = svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=60)
    step = svc.lifecycle.claim(received, "standard", owner="w", lease_seconds=60, worker="w")
    assert step.job is not None
    clock.advance(1200)  # a 20-minute run, its lease kept
    for _ in range(40):
        svc.lifecycle.heartbeat(step.job, lease_seconds=60)
    assert fleet_stats(svc, "t").oldest_queued_age_s is None
    clock.advance(60 + LEASE_GRACE_S)  # its worker died; the lease ran out
    sweeper.take_back_expired(svc, now=int(clock.now()))
    clock.advance(7)
    assert fleet_stats(svc, "t").oldest_queued_age_s == 7
    submit_job(svc, "t", job)
    clock.advance(3)
    assert fleet_stats(svc, "t").oldest_queued_age_s == 10  # the taken-back job is older
