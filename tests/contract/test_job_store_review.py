"""Irreversible steps in the store: checkpoints fenced by the attempt, a job in review out of
the sweeper's sight, and a resolution only of a job in review (fake and DynamoDB alike)."""

from __future__ import annotations

import pytest

from pagefleet.errors import IllegalTransition, LeaseLost
from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.record import JobError
from pagefleet.jobs.rules import LeaseRenewal
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from tests.support.review import stop_in_review

REQUEST = JobRequest.model_validate(
    {
        "steps": [
            {"action": "goto", "url": "http://127.0.0.1:9/order"},
            {"action": "click", "selector": "#place", "irreversible": True},
        ]
    }
)
NOW = 2_000_000_000


def _claim(svc: JobServices, job_id: str, owner: str, *, lease_s: int = 60):
    return svc.store.claim(
        "t", job_id, owner=owner, lease_until=NOW + lease_s, now=NOW, started_at=iso(utcnow())
    )


def _checkpoint(state: str, attempt: int = 1) -> Checkpoint:
    return Checkpoint.model_validate(
        {
            "step": 1,
            "label": "click #place",
            "state": state,
            "attempt": attempt,
            "at": iso(utcnow()),
        }
    )


def _in_review(svc: JobServices) -> str:
    job = submit_job(svc, "t", REQUEST).job
    stop_in_review(svc.store, "t", job.job_id, step=1, label="click #place", result={"so_far": 1})
    return job.job_id


def test_checkpoints_and_results_so_far_are_written_only_by_the_attempt_holding_the_lease(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-1)  # w1 is paused past its lease
    _claim(svc, job.job_id, "w2")  # attempt 2 takes over
    with pytest.raises(LeaseLost):
        svc.store.record_progress(
            "t", job.job_id, attempt=1, owner="w1", checkpoints=[_checkpoint("started")]
        )
    written = svc.store.record_progress(
        "t",
        job.job_id,
        attempt=2,
        owner="w2",
        checkpoints=[_checkpoint("started", 2)],
        result={"total": "12.00"},
    )
    assert written.status is JobStatus.RUNNING and written.result == {"total": "12.00"}
    compensation = Compensation(state="started", attempt=2, at=iso(utcnow()), reason="x")
    svc.store.record_progress(
        "t",
        job.job_id,
        attempt=2,
        owner="w2",
        checkpoints=[_checkpoint("done", 2)],
        compensation=compensation,
    )
    read = svc.store.get("t", job.job_id)
    assert [(c.state, c.attempt) for c in read.checkpoints] == [("done", 2)]
    assert read.result == {"total": "12.00"}  # kept when a write brings no result
    assert read.compensation == compensation


def test_a_started_checkpoint_renews_the_lease_and_is_refused_once_it_ended(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=5)  # the lease ends at NOW + 5
    with pytest.raises(LeaseLost, match="lease has ended"):  # its heartbeats failed
        svc.store.record_progress(
            "t",
            job.job_id,
            attempt=1,
            owner="w1",
            checkpoints=[_checkpoint("started")],
            renewal=LeaseRenewal(now=NOW + 5, until=NOW + 65),
        )
    assert svc.store.get("t", job.job_id).checkpoints == []
    written = svc.store.record_progress(
        "t",
        job.job_id,
        attempt=1,
        owner="w1",
        checkpoints=[_checkpoint("started")],
        renewal=LeaseRenewal(now=NOW + 4, until=NOW + 64),
    )
    assert written.lease_expires_at == NOW + 64 and written.checkpoints[0].state == "started"
    # The lease index follows: not due at the old end, due at the new one.
    assert ("t", job.job_id) not in svc.store.ops_due("lease", NOW + 60, limit=10)
    assert ("t", job.job_id) in svc.store.ops_due("lease", NOW + 65, limit=10)


def test_a_job_in_review_waits_for_no_lease_and_nothing_of_the_sweepers(svc: JobServices) -> None:
    job_id = _in_review(svc)
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.NEEDS_REVIEW and record.lease_owner is None
    assert record.checkpoints[0].state == "unknown" and record.result == {"so_far": 1}
    far = NOW + 10**6
    for kind in ("lease", "retry", "deadline", "dead", "due", "waiting"):
        assert ("t", job_id) not in svc.store.ops_due(kind, far, limit=1000)
    assert (
        record
        in svc.store.list_page("t", status=JobStatus.NEEDS_REVIEW, limit=10, start_key=None)[0]
    )
    assert svc.store.count("t", JobStatus.NEEDS_REVIEW) == 1
    with pytest.raises(IllegalTransition):
        _claim(svc, job_id, "w2")  # never claimed from review


def test_only_a_job_in_review_is_resolved(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    resolution = Resolution(outcome="done", by="t:k", at=iso(utcnow()))
    with pytest.raises(IllegalTransition, match="queued"):
        svc.store.resolve_review(
            "t",
            job.job_id,
            to=JobStatus.SUCCEEDED,
            at=iso(utcnow()),
            checkpoints=[],
            resolution=resolution,
        )
    job_id = _in_review(svc)
    done = svc.store.resolve_review(
        "t",
        job_id,
        to=JobStatus.SUCCEEDED,
        at=iso(utcnow()),
        checkpoints=[_checkpoint("done")],
        resolution=resolution.model_copy(update={"skipped": [2, 3]}),
    )
    assert done.status is JobStatus.SUCCEEDED and done.finished_at is not None
    assert done.error is None and done.result == {"so_far": 1}
    assert done.resolution is not None and done.resolution.skipped == [2, 3]
    with pytest.raises(IllegalTransition, match="succeeded"):
        svc.store.resolve_review(
            "t",
            job_id,
            to=JobStatus.QUEUED,
            at=iso(utcnow()),
            checkpoints=[],
            resolution=resolution,
        )


def test_resolved_to_run_again_it_is_queued_with_a_fresh_budget(svc: JobServices) -> None:
    job_id = _in_review(svc)
    resolution = Resolution(outcome="not_done", by="t:k", at=iso(utcnow()))
    queued = svc.store.resolve_review(
        "t",
        job_id,
        to=JobStatus.QUEUED,
        at=iso(utcnow()),
        checkpoints=[_checkpoint("not_done")],
        resolution=resolution,
    )
    assert queued.status is JobStatus.QUEUED and queued.attempt_base == queued.attempt == 1
    assert queued.enqueued_at is None and queued.error is None
    assert queued.resolution == resolution
    assert job_id in {j.job_id for j in svc.store.list_unqueued("9999-01-01T00:00:00.000Z")}
    again = _claim(svc, job_id, "w2")
    assert again.attempt == 2 and again.checkpoints[0].state == "not_done"


def test_resolved_to_run_again_its_workers_stops_are_forgotten_as_a_redrives_are(
    svc: JobServices,
) -> None:
    """A run again gets a fresh budget of lost leases too: the stops that sent it to review
    must not dead-letter it at its next one (a redrive clears them as well)."""
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    lost = svc.store.transition(
        "t", job.job_id, JobStatus.NEEDS_REVIEW, at=iso(utcnow()), lease_expired_before=NOW + 61
    )
    assert lost.leases_lost == 1
    resolution = Resolution(outcome="not_done", by="t:k", at=iso(utcnow()))
    queued = svc.store.resolve_review(
        "t",
        job.job_id,
        to=JobStatus.QUEUED,
        at=iso(utcnow()),
        checkpoints=[_checkpoint("not_done")],
        resolution=resolution,
    )
    assert queued.leases_lost == 0
    assert svc.store.get("t", job.job_id).leases_lost == 0


def test_a_lost_run_goes_to_review_with_its_checkpoints_in_the_same_write(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-100)
    moved = svc.store.transition(
        "t",
        job.job_id,
        JobStatus.NEEDS_REVIEW,
        at=iso(utcnow()),
        error=JobError(kind="needs_review", message="unknown"),
        lease_expired_before=NOW,
        checkpoints=[_checkpoint("unknown")],
    )
    assert moved.status is JobStatus.NEEDS_REVIEW and moved.lease_owner is None
    assert moved.checkpoints[0].state == "unknown"
    assert ("t", job.job_id) not in svc.store.ops_due("lease", NOW + 10**6, limit=1000)
    cancelled = svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    assert cancelled.status is JobStatus.CANCELLED
