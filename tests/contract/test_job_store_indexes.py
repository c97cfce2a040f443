"""What the sweeper, the listing and the API read: indexes, idempotency and flags."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pagefleet.errors import IdempotencyConflict, IllegalTransition, NotFound
from pagefleet.jobs.models import JobRequest, epoch_of_iso, iso, new_job_id, utcnow
from pagefleet.jobs.record import AttemptRecord, JobError, JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.tenancy.limits import IDEMPOTENCY_TTL_S

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
NOW = 2_000_000_000


def _claim(svc: JobServices, job_id: str, owner: str, *, now: int = NOW, lease_s: int = 60):
    return svc.store.claim(
        "t", job_id, owner=owner, lease_until=now + lease_s, now=now, started_at=iso(utcnow())
    )


def test_listing_is_newest_first_and_pages_cover_everything_once(svc: JobServices) -> None:
    ids = [submit_job(svc, "t", REQUEST).job.job_id for _ in range(7)]
    submit_job(svc, "other", REQUEST)
    seen: list[str] = []
    start = None
    while True:
        page, start = svc.store.list_page("t", status=None, limit=3, start_key=start)
        seen += [j.job_id for j in page]
        if start is None:
            break
        assert set(start) == {"pk", "sk"}
    assert seen == sorted(ids, reverse=True)


def test_listing_by_status_keeps_pages_full(svc: JobServices) -> None:
    ids = [submit_job(svc, "t", REQUEST).job.job_id for _ in range(5)]
    for job_id in ids[:3]:
        svc.store.transition("t", job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    page, start = svc.store.list_page("t", status=JobStatus.CANCELLED, limit=2, start_key=None)
    assert [j.job_id for j in page] == sorted(ids[:3], reverse=True)[:2]
    assert start is not None and set(start) == {"pk", "sk", "status_pk"}
    rest, end = svc.store.list_page("t", status=JobStatus.CANCELLED, limit=2, start_key=start)
    assert [j.job_id for j in rest] == [min(ids[:3])]
    assert end is None


def test_a_job_is_unqueued_until_its_message_is_known_sent(svc: JobServices) -> None:
    record = submit_job(svc, "t", REQUEST).job.model_copy(
        update={"job_id": "0" * 26, "enqueued_at": None}
    )
    svc.store.create(record)
    later = "9999-01-01T00:00:00.000Z"
    assert record.job_id in {j.job_id for j in svc.store.list_unqueued(later)}
    assert record.job_id not in {j.job_id for j in svc.store.list_unqueued(record.created_at)}
    svc.store.mark_enqueued("t", record.job_id, iso(utcnow()))
    assert record.job_id not in {j.job_id for j in svc.store.list_unqueued(later)}
    with pytest.raises(NotFound):
        svc.store.mark_enqueued("t", "nosuchjob", iso(utcnow()))


def test_an_idempotency_key_is_taken_once(svc: JobServices) -> None:
    first = submit_job(svc, "t", REQUEST, idempotency_key="order-42").job
    now = svc.clock.now()
    idem = svc.store.get_idempotency("t", "order-42", now=now)
    assert idem is not None and idem.job_id == first.job_id
    assert idem.fingerprint == REQUEST.fingerprint()
    clash = first.model_copy(update={"job_id": "1" * 26})
    with pytest.raises(IdempotencyConflict):
        svc.store.create(clash, idempotency_fingerprint="x")
    assert svc.store.get_idempotency("other", "order-42", now=now) is None


def test_an_idempotency_key_is_free_again_once_its_day_is_over(svc: JobServices) -> None:
    """Past its expiry a key reads as absent and is taken by the next job, whether or not
    TTL has deleted its item yet (days later, on DynamoDB)."""
    first = submit_job(svc, "t", REQUEST, idempotency_key="order-43").job
    made = int(epoch_of_iso(first.created_at))
    held = svc.store.get_idempotency("t", "order-43", now=made + IDEMPOTENCY_TTL_S - 1)
    assert held is not None and held.job_id == first.job_id
    assert held.expires_at == made + IDEMPOTENCY_TTL_S
    assert svc.store.get_idempotency("t", "order-43", now=made + IDEMPOTENCY_TTL_S) is None

    def later(seconds: int) -> JobRecord:
        at = datetime.fromtimestamp(made + IDEMPOTENCY_TTL_S + seconds, UTC)
        return first.model_copy(update={"job_id": new_job_id(), "created_at": iso(at)})

    second = later(5)
    svc.store.create(second, idempotency_fingerprint="another body")
    taken = svc.store.get_idempotency("t", "order-43", now=made + IDEMPOTENCY_TTL_S + 6)
    assert taken is not None and (taken.job_id, taken.fingerprint) == (
        second.job_id,
        "another body",
    )
    with pytest.raises(IdempotencyConflict):  # the new holder's day has begun
        svc.store.create(later(60), idempotency_fingerprint="x")


def test_the_ops_index_holds_each_job_in_the_set_it_waits_in(svc: JobServices) -> None:
    later = {"deadline": utcnow().replace(year=2040)}
    deadline_job = submit_job(
        svc, "t", REQUEST.model_copy(update={"deadline": later["deadline"]})
    ).job
    assert deadline_job.deadline_at is not None
    due = deadline_job.deadline_at + 1
    assert ("t", deadline_job.job_id) in svc.store.ops_due("deadline", due)
    assert ("t", deadline_job.job_id) not in svc.store.ops_due("deadline", due - 2)

    running = submit_job(svc, "t", REQUEST).job
    _claim(svc, running.job_id, "w1", lease_s=30)
    assert ("t", running.job_id) in svc.store.ops_due("lease", NOW + 31)
    assert ("t", running.job_id) not in svc.store.ops_due("lease", NOW + 30)
    # A claim moves the job out of the deadline set.
    _claim(svc, deadline_job.job_id, "w2")
    assert ("t", deadline_job.job_id) not in svc.store.ops_due("deadline", due)

    svc.store.finish(
        "t",
        running.job_id,
        attempt=1,
        owner="w1",
        status=JobStatus.RETRY_SCHEDULED,
        at=iso(utcnow()),
        result=None,
        artifacts=[],
        error=JobError(kind="navigation_failed", message="reset", retryable=True),
        history=AttemptRecord(attempt=1, worker="w1", started_at=iso(utcnow())),
        retry_at=NOW + 100,
    )
    assert ("t", running.job_id) not in svc.store.ops_due("lease", NOW + 1000)
    assert ("t", running.job_id) in svc.store.ops_due("retry", NOW + 101)
    svc.store.postpone_retry("t", running.job_id, due=NOW + 500)
    assert ("t", running.job_id) not in svc.store.ops_due("retry", NOW + 101)
    assert ("t", running.job_id) in svc.store.ops_due("retry", NOW + 501)
    # The sweeper looks later; the retry itself stays due, so its re-sent message is claimed.
    assert svc.store.get("t", running.job_id).retry_at == NOW + 100


def test_dead_letters_are_listed_and_a_redrive_restores_the_budget(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=-1)
    _claim(svc, job.job_id, "w2", lease_s=-1)
    svc.store.transition(
        "t",
        job.job_id,
        JobStatus.DEAD_LETTERED,
        at=iso(utcnow()),
        error=JobError(kind="dead_lettered", message="too many receives"),
    )
    assert ("t", job.job_id) in svc.store.ops_due("dead", 4_000_000_000)
    redriven = svc.store.transition("t", job.job_id, JobStatus.QUEUED, at=iso(utcnow()))
    assert redriven.status is JobStatus.QUEUED
    assert redriven.attempts_used == 0 and redriven.error is None
    assert ("t", job.job_id) not in svc.store.ops_due("dead", 4_000_000_000)
    assert job.job_id in {j.job_id for j in svc.store.list_unqueued("9999")}


def test_a_dead_workers_job_is_taken_back_only_after_its_lease(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", lease_s=60)
    with pytest.raises(IllegalTransition):
        svc.store.transition(
            "t", job.job_id, JobStatus.RETRY_SCHEDULED, at=iso(utcnow()), lease_expired_before=NOW
        )
    moved = svc.store.transition(
        "t",
        job.job_id,
        JobStatus.RETRY_SCHEDULED,
        at=iso(utcnow()),
        lease_expired_before=NOW + 61,
        retry_at=NOW + 61,
    )
    assert moved.status is JobStatus.RETRY_SCHEDULED and moved.lease_owner is None
    # Each lease taken back counts (a job that keeps killing its worker is dead-lettered);
    # other moves do not, and a redrive starts the count again.
    assert moved.leases_lost == 1
    _claim(svc, job.job_id, "w2", now=NOW + 62, lease_s=-1)
    again = svc.store.transition(
        "t", job.job_id, JobStatus.DEAD_LETTERED, at=iso(utcnow()), lease_expired_before=NOW + 62
    )
    assert svc.store.get("t", job.job_id).leases_lost == again.leases_lost == 2
    redriven = svc.store.transition("t", job.job_id, JobStatus.QUEUED, at=iso(utcnow()))
    assert redriven.leases_lost == 0 == svc.store.get("t", job.job_id).leases_lost


def test_the_next_lease_end_is_read_from_the_ops_index(svc: JobServices) -> None:
    """What a worker's lease watch waits for: the earliest lease ending at or after a time."""
    assert svc.store.next_due("lease", NOW) is None
    jobs = [submit_job(svc, "t", REQUEST).job.job_id for _ in range(6)]
    for n, job_id in enumerate(jobs):  # leases end NOW+10 ... NOW+60, over the shards
        _claim(svc, job_id, f"w{n}", lease_s=10 * (n + 1))
    assert svc.store.next_due("lease", NOW) == NOW + 10
    assert svc.store.next_due("lease", NOW + 10) == NOW + 10
    assert svc.store.next_due("lease", NOW + 11) == NOW + 20
    svc.store.extend_lease("t", jobs[1], attempt=1, owner="w1", lease_until=NOW + 100)
    assert svc.store.next_due("lease", NOW + 11) == NOW + 30
    assert svc.store.next_due("lease", NOW + 61) == NOW + 100
    assert svc.store.next_due("lease", NOW + 101) is None
    assert svc.store.next_due("retry", NOW) is None  # another set


def test_cancel_flag_and_deferral_note(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    with pytest.raises(IllegalTransition):
        svc.store.request_cancel("t", job.job_id, at=iso(utcnow()))
    at = iso(utcnow())
    svc.store.defer("t", job.job_id, reason="circuit open", at=at, successor="m-2", due=NOW + 5)
    noted = svc.store.get("t", job.job_id)
    assert noted.deferred_reason == "circuit open"
    assert (noted.deferred_to, noted.deferred_due) == ("m-2", NOW + 5)
    claimed = _claim(svc, job.job_id, "w1")
    # A claim ends the wait: no message of the job is dropped for a successor any more.
    assert claimed.deferred_reason is claimed.deferred_to is claimed.deferred_due is None
    assert svc.store.get("t", job.job_id).deferred_to is None
    assert svc.store.run_signals("t", job.job_id, now=0).cancel_requested is False
    first = svc.store.request_cancel("t", job.job_id, at="2026-01-01T00:00:00.000Z")
    again = svc.store.request_cancel("t", job.job_id, at="2027-01-01T00:00:00.000Z")
    assert first.cancel_requested_at == again.cancel_requested_at == "2026-01-01T00:00:00.000Z"
    assert svc.store.run_signals("t", job.job_id, now=0).cancel_requested is True
    svc.store.defer("t", job.job_id, reason="late", at=iso(utcnow()))  # running: no note
    assert svc.store.get("t", job.job_id).deferred_reason is None


def test_a_running_job_cannot_be_finished_into_a_state_it_cannot_enter(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1")
    with pytest.raises(IllegalTransition):
        svc.store.finish(
            "t",
            job.job_id,
            attempt=1,
            owner="w1",
            status=JobStatus.QUEUED,
            at=iso(utcnow()),
            result=None,
            artifacts=[],
            error=None,
            history=AttemptRecord(attempt=1, worker="w1", started_at=iso(utcnow())),
        )


def test_counts_and_the_oldest_job_by_status(svc: JobServices) -> None:
    ids = [submit_job(svc, "t", REQUEST).job.job_id for _ in range(3)]
    submit_job(svc, "other", REQUEST)
    svc.store.transition("t", ids[0], JobStatus.CANCELLED, at=iso(utcnow()))
    assert svc.store.count("t", JobStatus.QUEUED) == 2
    assert svc.store.count("t", JobStatus.CANCELLED) == 1
    assert svc.store.count("t", JobStatus.RUNNING) == 0
    oldest = svc.store.oldest("t", JobStatus.QUEUED)
    assert oldest is not None and oldest.job_id == ids[1]
    assert svc.store.oldest("t", JobStatus.RUNNING) is None
