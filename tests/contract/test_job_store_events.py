"""The run-event counter on a job's record (fake and DynamoDB alike): a claim reserves an
attempt's first numbers in its own write, ``allocate_events`` reserves more after them, two
writers never get the same numbers, and a record from before the counter (none on it) or a
deleted job is never given one."""

from __future__ import annotations

import threading
import time

import pytest

from pagefleet.errors import NotFound
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.live.numbers import RESERVE, claimed_range

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
LATER = 2_000_000_000


def _claim(svc: JobServices, job_id: str, owner: str, *, events: int, lease_s: int = 60):
    now = int(time.time())
    return svc.store.claim(
        "t",
        job_id,
        owner=owner,
        lease_until=now + lease_s,
        now=now,
        started_at=iso(utcnow()),
        events=events,
    )


def test_a_new_job_counts_its_events_on_its_record_and_each_claim_reserves_after_the_last(
    svc: JobServices,
) -> None:
    job = submit_job(svc, "t", REQUEST).job
    assert job.events_on_record and (job.events_seq, job.events_bounded) == (0, 0)
    assert svc.store.get("t", job.job_id).events_on_record
    first = _claim(svc, job.job_id, "w1", events=RESERVE, lease_s=-1)
    assert claimed_range(first, RESERVE) == (1, RESERVE, 0)
    more = svc.store.allocate_events("t", job.job_id, count=5, bounded=3, expires_at=LATER)
    assert more == (RESERVE + 1, RESERVE + 3)
    second = _claim(svc, job.job_id, "w2", events=RESERVE)  # w1's lease ran out
    assert second.attempt == 2 and second.leases_lost == 1
    assert claimed_range(second, RESERVE) == (RESERVE + 6, 2 * RESERVE + 5, RESERVE + 3)
    assert svc.store.get("t", job.job_id).events_seq == 2 * RESERVE + 5


def test_a_claim_without_a_reservation_leaves_the_counter_alone(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    claimed = _claim(svc, job.job_id, "w1", events=0)
    assert (claimed.events_seq, claimed.events_bounded) == (0, 0)
    # What a worker of the version before leaves: its events are numbered elsewhere.
    assert not claimed.events_on_record


def test_writers_reserving_at_once_never_share_a_number(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    _claim(svc, job.job_id, "w1", events=RESERVE)
    got: list[tuple[int, int]] = []

    def reserve() -> None:
        for _ in range(5):
            first, _ = svc.store.allocate_events(
                "t", job.job_id, count=3, bounded=1, expires_at=LATER
            )
            got.append((first, first + 2))

    threads = [threading.Thread(target=reserve) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    numbers = sorted(n for first, last in got for n in range(first, last + 1))
    assert numbers == list(range(RESERVE + 1, RESERVE + 61))
    assert svc.store.get("t", job.job_id).events_bounded == RESERVE + 20


def test_a_record_from_before_the_counter_gets_none(svc: JobServices) -> None:
    """Its numbers go on from its own counter item: none may start again from 1 here."""
    job = submit_job(svc, "t", REQUEST).job
    old = job.model_copy(update={"job_id": "old-job", "events_seq": None, "events_bounded": 0})
    svc.store.create(old)
    stored = svc.store.get("t", "old-job")
    assert not stored.events_on_record
    claimed = _claim(svc, "old-job", "w1", events=0)  # the worker asks for none on it
    assert claimed.events_seq is None
    with pytest.raises(NotFound):
        svc.store.allocate_events("t", "old-job", count=1, bounded=1, expires_at=LATER)
    assert svc.store.get("t", "old-job").events_seq is None


def test_a_deleted_job_is_not_made_again_by_its_events(svc: JobServices) -> None:
    with pytest.raises(NotFound):
        svc.store.allocate_events("t", "never-was", count=1, bounded=1, expires_at=LATER)
    with pytest.raises(NotFound):
        svc.store.get("t", "never-was")
