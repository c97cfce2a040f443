"""Conditional writes enforce the transition table and the lease fence, in the store itself."""

from __future__ import annotations

import pytest

from pagefleet.errors import IllegalTransition, LeaseLost, NotFound
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.record import AttemptRecord, JobError
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


def _now() -> int:
    return int(utcnow().timestamp())


def _claim(svc: JobServices, job_id: str, owner: str, lease_s: int = 60, now: int | None = None):
    now = _now() if now is None else now
    return svc.store.claim(
        "t", job_id, owner=owner, lease_until=now + lease_s, now=now, started_at=iso(utcnow())
    )


def _finish(
    svc: JobServices,
    job_id: str,
    attempt: int,
    owner: str,
    status: JobStatus,
    *,
    error: JobError | None = None,
    retry_at: int | None = None,
    expires_at: int | None = None,
):
    return svc.store.finish(
        "t",
        job_id,
        attempt=attempt,
        owner=owner,
        status=status,
        at=iso(utcnow()),
        result={"by": owner},
        artifacts=[],
        error=error,
        history=AttemptRecord(attempt=attempt, worker=owner, started_at=iso(utcnow())),
        retry_at=retry_at,
        expires_at=expires_at,
    )


def test_claim_bumps_attempt_and_sets_lease(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    claimed = _claim(svc, job.job_id, "w1")
    assert claimed.status is JobStatus.RUNNING
    assert claimed.attempt == 1
    assert claimed.lease_owner == "w1"


def test_a_live_lease_cannot_be_claimed_again(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    with pytest.raises(IllegalTransition, match="running"):
        _claim(svc, job.job_id, "w2")


def test_fenced_writes_refuse_a_worker_that_lost_its_lease(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-1)  # already expired: w1 was paused
    _claim(svc, job.job_id, "w2")  # the reclaim is attempt 2
    with pytest.raises(LeaseLost):
        _finish(svc, job.job_id, 1, "w1", JobStatus.FAILED)
    with pytest.raises(LeaseLost):
        svc.store.extend_lease("t", job.job_id, attempt=1, owner="w1", lease_until=_now() + 60)
    done = _finish(svc, job.job_id, 2, "w2", JobStatus.SUCCEEDED)
    assert done.status is JobStatus.SUCCEEDED and done.result == {"by": "w2"}
    # After the final write the stale worker still cannot change anything.
    with pytest.raises(LeaseLost):
        _finish(svc, job.job_id, 2, "w2", JobStatus.FAILED)
    assert svc.store.get("t", job.job_id).result == {"by": "w2"}


def test_final_jobs_never_move(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    _finish(svc, job.job_id, 1, "w1", JobStatus.SUCCEEDED)
    with pytest.raises(IllegalTransition, match="succeeded"):
        svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    with pytest.raises(IllegalTransition):
        _claim(svc, job.job_id, "w3")


def test_queued_job_can_be_cancelled_and_then_not_started(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    with pytest.raises(IllegalTransition, match="cancelled"):
        _claim(svc, job.job_id, "w1")


def test_other_tenant_cannot_touch_the_job(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    with pytest.raises(NotFound):
        svc.store.transition("other", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    with pytest.raises(NotFound):
        svc.store.get("other", job.job_id)


def test_attempt_history_accumulates(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-1)
    _claim(svc, job.job_id, "w2")
    done = _finish(svc, job.job_id, 2, "w2", JobStatus.SUCCEEDED)
    assert [a.worker for a in done.attempts] == ["w2"]
    assert done.lease_owner is None and done.finished_at is not None


def _claim_at_once(svc: JobServices, job_id: str, owners: list[str]) -> list[str]:
    """Each owner claims the job at the same moment; sorted "won" / "refused"."""
    import threading

    barrier = threading.Barrier(len(owners))
    outcomes: list[str] = []

    def claim_it(owner: str) -> None:
        barrier.wait()
        try:
            _claim(svc, job_id, owner)
            outcomes.append("won")
        except IllegalTransition:
            outcomes.append("refused")

    threads = [threading.Thread(target=claim_it, args=(owner,)) for owner in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


def test_concurrent_claims_of_one_job_have_one_winner(svc: JobServices) -> None:
    """Two workers receiving duplicate messages at once: exactly one attempt runs."""
    job = submit_job(svc, "t", REQUEST).job
    outcomes = _claim_at_once(svc, job.job_id, [f"w{n}" for n in range(6)])
    assert outcomes == ["refused"] * 5 + ["won"]
    assert svc.store.get("t", job.job_id).attempt == 1


def test_a_retry_cannot_start_before_its_backoff(svc: JobServices) -> None:
    from pagefleet.errors import RetryNotDue
    from pagefleet.jobs.record import JobError

    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    svc.store.finish(
        "t",
        job.job_id,
        attempt=1,
        owner="w1",
        status=JobStatus.RETRY_SCHEDULED,
        at=iso(utcnow()),
        result=None,
        artifacts=[],
        error=JobError(kind="navigation", message="reset", retryable=True),
        history=AttemptRecord(attempt=1, worker="w1", started_at=iso(utcnow())),
        retry_at=_now() + 30,
    )
    with pytest.raises(RetryNotDue):
        _claim(svc, job.job_id, "w2")
    later = _now() + 31
    retried = svc.store.claim(
        "t", job.job_id, owner="w2", lease_until=later + 60, now=later, started_at=iso(utcnow())
    )
    assert retried.attempt == 2
    assert retried.retry_at is None


def test_a_runs_changes_and_error_details_are_kept_with_its_outcome(svc: JobServices) -> None:
    from pagefleet.jobs.record import JobError
    from pagefleet.monitors.changes import Changes, ChangeSummary

    changes = Changes(changed=True, summary=ChangeSummary(added=2), baseline_job_id="b" * 26)
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    done = svc.store.finish(
        "t",
        job.job_id,
        attempt=1,
        owner="w1",
        status=JobStatus.SUCCEEDED,
        at=iso(utcnow()),
        result={"a": 1},
        artifacts=[],
        error=None,
        history=AttemptRecord(attempt=1, worker="w1", started_at=iso(utcnow())),
        changes=changes.model_dump(mode="json"),
    )
    assert done.changes == changes and svc.store.get("t", job.job_id).changes == changes

    other = submit_job(svc, "t", REQUEST).job
    _claim(svc, other.job_id, "w1")
    error = JobError(kind="data_quality", message="m", details=[{"path": "result.a"}])
    failed = svc.store.finish(
        "t",
        other.job_id,
        attempt=1,
        owner="w1",
        status=JobStatus.FAILED,
        at=iso(utcnow()),
        result=None,
        artifacts=[],
        error=error,
        history=AttemptRecord(attempt=1, worker="w1", started_at=iso(utcnow())),
    )
    assert failed.changes is None
    assert svc.store.get("t", other.job_id).error == error


def test_claiming_a_running_job_whose_lease_is_over_counts_the_lost_lease(
    svc: JobServices,
) -> None:
    """What a take-back writes, in the claim's own write: one more lost lease, and the
    error lease_expired naming the attempt whose worker stopped."""
    from pagefleet.jobs.rules import lost_lease_error

    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-1)  # w1 stopped heartbeating
    reclaimed = _claim(svc, job.job_id, "w2")
    assert reclaimed.status is JobStatus.RUNNING and reclaimed.attempt == 2
    assert reclaimed.lease_owner == "w2"
    assert reclaimed.leases_lost == 1
    assert reclaimed.error == lost_lease_error(1)
    assert reclaimed.error is not None and reclaimed.error.kind == "lease_expired"
    assert reclaimed.error.retryable and reclaimed.error.timeout == "lease"
    assert "attempt 1" in reclaimed.error.message
    stored = svc.store.get("t", job.job_id)
    assert (stored.leases_lost, stored.error, stored.attempt) == (1, lost_lease_error(1), 2)
    _claim(svc, job.job_id, "w3", lease_s=-1, now=_now() + 61)  # w2 stopped too
    again = svc.store.get("t", job.job_id)
    assert (again.leases_lost, again.error, again.attempt) == (2, lost_lease_error(2), 3)


def test_claiming_a_queued_or_retried_job_leaves_the_lost_leases_alone(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    first = _claim(svc, job.job_id, "w1")
    assert first.leases_lost == 0 and first.error is None
    failed = JobError(kind="navigation", message="reset", retryable=True)
    _finish(svc, job.job_id, 1, "w1", JobStatus.RETRY_SCHEDULED, error=failed, retry_at=_now())
    retried = _claim(svc, job.job_id, "w2")
    assert retried.attempt == 2 and retried.leases_lost == 0 and retried.error == failed
    # Taken back (counted there), then claimed from retry: counted once, by the take-back.
    svc.store.transition(
        "t",
        job.job_id,
        JobStatus.RETRY_SCHEDULED,
        at=iso(utcnow()),
        lease_expired_before=_now() + 61,
        retry_at=_now(),
    )
    assert _claim(svc, job.job_id, "w3", now=_now() + 61).leases_lost == 1


def test_a_running_job_under_a_live_lease_is_not_reclaimed_nor_counted(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    with pytest.raises(IllegalTransition, match="running"):
        _claim(svc, job.job_id, "w2")
    stored = svc.store.get("t", job.job_id)
    assert (stored.attempt, stored.lease_owner, stored.leases_lost, stored.error) == (
        1,
        "w1",
        0,
        None,
    )


def test_concurrent_reclaims_of_a_lost_lease_have_one_winner_and_count_it_once(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-1)
    outcomes = _claim_at_once(svc, job.job_id, [f"w{n}" for n in range(2, 6)])
    assert outcomes == ["refused"] * 3 + ["won"]
    stored = svc.store.get("t", job.job_id)
    assert stored.attempt == 2 and stored.leases_lost == 1


def test_a_worker_may_end_its_claimed_job_as_a_dead_letter_listed_as_one(
    svc: JobServices,
) -> None:
    """A reclaim at the dead-worker limit ends the job so, from the worker's own claim."""
    from pagefleet.jobs import sweeper

    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    ended = _finish(svc, job.job_id, 1, "w1", JobStatus.DEAD_LETTERED)
    assert ended.status is JobStatus.DEAD_LETTERED and ended.lease_owner is None
    assert [j.job_id for j in sweeper.list_dead_letters(svc)] == [job.job_id]


def test_an_ended_jobs_expiry_is_read_with_it_and_a_new_job_has_none(svc: JobServices) -> None:
    """The record carries its TTL attribute, so a reader can take the job as gone past it
    whether or not DynamoDB's TTL has deleted the item yet (rules.gone)."""
    from pagefleet.jobs.rules import gone

    job = submit_job(svc, "t", REQUEST).job
    assert job.expires_at is None and svc.store.get("t", job.job_id).expires_at is None
    _claim(svc, job.job_id, "w1")
    ends = _now() + 3 * 86_400
    done = _finish(svc, job.job_id, 1, "w1", JobStatus.SUCCEEDED, expires_at=ends)
    read = svc.store.get("t", job.job_id)
    assert done.expires_at == ends and read.expires_at == ends
    listed, _ = svc.store.list_page("t", status=None, limit=5, start_key=None)
    assert [j.expires_at for j in listed] == [ends]
    assert not gone(read, ends - 1) and gone(read, ends)
