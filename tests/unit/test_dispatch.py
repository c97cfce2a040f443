"""Delayed, dependent and prioritized jobs, and named workflow versions, on the fakes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from devstack.fakes import FakeClock, FakeQueue
from pagefleet.errors import InvalidField
from pagefleet.jobs import sweeper
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.dependencies import DependencyRelease
from pagefleet.jobs.lifecycle import Outcome, Then
from pagefleet.jobs.record import JobError
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission
from pagefleet.workflow.versions import WorkflowDefinition, put_version

STEPS = [{"action": "goto", "url": "http://127.0.0.1:9/"}]


def job(**extra: object) -> JobSubmission:
    return JobSubmission.model_validate({"steps": STEPS, **extra})


def take(svc: JobServices, key: str = "standard"):
    [received] = svc.queue.receive(key, max_messages=1, wait_seconds=0, visibility=60)
    return received


def claim(svc: JobServices, received, owner: str = "w"):
    return svc.lifecycle.claim(
        received, received.queue, owner=owner, lease_seconds=60, worker=owner
    )


def succeed(svc: JobServices, job_id: str, result: dict | None = None) -> None:
    step = claim(svc, take(svc))
    assert step.job is not None and step.job.job_id == job_id, step.reason
    svc.lifecycle.finish(step.job, Outcome(JobStatus.SUCCEEDED, result=result), "w")


def take_none():
    from pagefleet.jobs.ports import ReceivedMessage

    return ReceivedMessage(None, "gone", "gone", 1, 0, "", "standard")


def test_a_short_delay_is_a_delayed_message_and_the_job_reads_scheduled(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    made = submit_job(svc, "t", job(delay_seconds=5)).job
    assert made.status is JobStatus.SCHEDULED and made.run_at == int(clock.now()) + 5
    assert queue.sent[-1][1] == 5  # SQS DelaySeconds
    assert queue.visible("standard") == []
    clock.advance(5)
    step = claim(svc, take(svc))
    assert step.then is Then.RUN and step.job is not None
    assert step.job.status is JobStatus.RUNNING


def test_an_early_copy_of_a_scheduled_job_waits_for_its_start(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    made = submit_job(svc, "t", job(delay_seconds=300)).job
    svc.lifecycle.send(made)  # a stray undelayed copy
    step = claim(svc, take(svc))
    assert step.then is Then.HIDE
    assert svc.store.get("t", made.job_id).status is JobStatus.SCHEDULED


def test_a_far_start_is_dispatched_by_the_sweeper_when_within_reach(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    start = datetime.fromtimestamp(clock.now(), UTC) + timedelta(hours=2)
    made = submit_job(svc, "t", job(run_at=start.isoformat())).job
    assert made.status is JobStatus.SCHEDULED and queue.sent == []
    assert sweeper.sweep(svc).scheduled_dispatched == 0
    clock.advance(2 * 3600 - 600)  # ten minutes before its start
    assert sweeper.sweep(svc).scheduled_dispatched == 1
    assert queue.sent[-1][1] == 600
    assert sweeper.sweep(svc).scheduled_dispatched == 0  # once
    clock.advance(600)
    assert claim(svc, take(svc)).then is Then.RUN


def test_a_child_waits_until_every_parent_succeeded_then_runs_with_their_results(
    svc: JobServices, queue: FakeQueue
) -> None:
    a = submit_job(svc, "t", job()).job
    succeed(svc, a.job_id, {"title": "A"})
    b = submit_job(svc, "t", job()).job
    child = submit_job(
        svc,
        "t",
        job(
            depends_on=[a.job_id, b.job_id],
            steps=[
                {
                    "action": "goto",
                    "url": f"http://127.0.0.1:9/{{{{parents.{a.job_id}.result.title}}}}",
                }
            ],
        ),
    ).job
    assert child.status is JobStatus.WAITING
    release = DependencyRelease(svc.lifecycle)
    succeed(svc, b.job_id)
    finished = svc.store.get("t", b.job_id)
    release.handle([JobChange(old=b, new=finished, sequence="1")])
    released = svc.store.get("t", child.job_id)
    assert released.status is JobStatus.QUEUED and released.enqueued_at is not None
    assert [m.job_id for m in queue.visible("standard")] == [child.job_id]


def test_a_failed_parent_cancels_the_child_naming_it(svc: JobServices) -> None:
    parent = submit_job(svc, "t", job(max_attempts=1)).job
    child = submit_job(svc, "t", job(depends_on=[parent.job_id])).job
    step = claim(svc, take(svc))
    assert step.job is not None
    svc.lifecycle.finish(
        step.job, Outcome(JobStatus.FAILED, error=JobError(kind="step_failed", message="no")), "w"
    )
    DependencyRelease(svc.lifecycle).handle(
        [JobChange(old=step.job, new=svc.store.get("t", parent.job_id), sequence="2")]
    )
    cancelled = svc.store.get("t", child.job_id)
    assert cancelled.status is JobStatus.CANCELLED and cancelled.error is not None
    assert parent.job_id in cancelled.error.message and "failed" in cancelled.error.message
    assert cancelled.error.kind == "dependency_failed"


def test_parents_that_already_ended_settle_the_child_at_submit(svc: JobServices) -> None:
    parent = submit_job(svc, "t", job()).job
    svc.lifecycle.cancel("t", parent.job_id)
    child = submit_job(svc, "t", job(depends_on=[parent.job_id])).job
    assert child.status is JobStatus.CANCELLED


def test_the_sweeper_catches_a_missed_release(svc: JobServices, clock: FakeClock) -> None:
    parent = submit_job(svc, "t", job()).job
    child = submit_job(svc, "t", job(depends_on=[parent.job_id])).job
    succeed(svc, parent.job_id)  # ... and the stream's change never arrives
    clock.advance(61)
    assert sweeper.sweep(svc).waiting_settled == 1
    assert svc.store.get("t", child.job_id).status is JobStatus.QUEUED


def test_dependencies_are_checked_at_submit(svc: JobServices) -> None:
    with pytest.raises(InvalidField) as missing:
        submit_job(svc, "t", job(depends_on=["0" * 26]))
    assert missing.value.field == "depends_on[0]"
    other = submit_job(svc, "other", job()).job
    with pytest.raises(InvalidField):
        submit_job(svc, "t", job(depends_on=[other.job_id]))  # another tenant's job
    parent = submit_job(svc, "t", job()).job
    with pytest.raises(InvalidField, match="depends_on"):
        submit_job(svc, "t", job(depends_on=[parent.job_id], delay_seconds=5))


def test_priority_picks_the_pools_queue(svc: JobServices, queue: FakeQueue) -> None:
    high = submit_job(svc, "t", job(priority="high")).job
    low = submit_job(svc, "t", job(priority="low")).job
    assert [m.job_id for m in queue.visible("standard-high")] == [high.job_id]
    assert [m.job_id for m in queue.visible("standard-low")] == [low.job_id]
    step = claim(svc, take(svc, "standard-high"))
    assert step.job is not None
    # A retry goes back to the job's own priority queue.
    svc.lifecycle.finish(
        step.job,
        Outcome(
            JobStatus.RETRY_SCHEDULED,
            error=JobError(kind="navigation_failed", message="x", retryable=True),
            retry_delay_s=0,
        ),
        "w",
    )
    assert [m.job_id for m in queue.visible("standard-high")] == [high.job_id]


def test_a_named_workflow_version_runs_as_named(svc: JobServices) -> None:
    assert svc.workflows is not None
    v1 = WorkflowDefinition.model_validate(
        {"steps": [{"action": "goto", "url": "{{inputs.site}}/v1"}], "inputs": {"site": "x"}}
    )
    v2 = WorkflowDefinition.model_validate({"steps": [{"action": "goto", "url": "http://v2/"}]})
    put_version(svc.workflows, "t", "shop", v1, "2026-11-30T00:00:00Z")
    put_version(svc.workflows, "t", "shop", v2, "2026-11-30T00:00:01Z")
    old = submit_job(
        svc,
        "t",
        JobSubmission.model_validate({"workflow": "shop@1", "inputs": {"site": "http://s"}}),
    ).job
    assert (old.workflow, old.workflow_version) == ("shop", 1)
    assert old.request.steps[0].model_dump()["url"] == "{{inputs.site}}/v1"
    assert old.request.inputs == {"site": "http://s"}  # the job's input over the default
    latest = submit_job(svc, "t", JobSubmission.model_validate({"workflow": "shop"})).job
    assert latest.workflow_version == 2
    with pytest.raises(InvalidField) as unknown:
        submit_job(svc, "t", JobSubmission.model_validate({"workflow": "shop@3"}))
    assert unknown.value.field == "workflow"
    with pytest.raises(InvalidField):
        submit_job(svc, "other", JobSubmission.model_validate({"workflow": "shop"}))
