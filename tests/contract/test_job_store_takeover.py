"""The takeover lock on a job's record (fake and DynamoDB alike): taken only while the job
runs (or waits for a person), by one holder at a time; renewed by its holder, pushed by each
input while it lasts and refused after; handed back by its holder only; returned after its
idle time once, by the one move that wins; read by the worker with its cancel flag; another
tenant's job cannot be touched."""

from __future__ import annotations

import time

import pytest

from pagefleet.errors import JobNotRunning, NotFound, TakenOver, TakeoverNotHeld
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.takeover import Takeover

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
NOW = 2_000_000_000


def _lock(holder: str, takeover_id: str, *, until: int, idle_s: int = 60) -> Takeover:
    return Takeover(
        takeover_id=takeover_id, holder=holder, since=iso(utcnow()), until=until, idle_s=idle_s
    )


def _running(svc: JobServices) -> JobRecord:
    job = submit_job(svc, "t", REQUEST).job
    now = int(time.time())
    return svc.store.claim(
        "t", job.job_id, owner="w1", lease_until=now + 60, now=now, started_at=iso(utcnow())
    )


def test_one_holder_at_a_time_until_its_time_runs_out(svc: JobServices) -> None:
    job = _running(svc)
    taken = svc.store.take_over("t", job.job_id, _lock("t:k1", "A", until=NOW + 60), now=NOW)
    assert taken.takeover is not None and taken.takeover.holder == "t:k1"
    assert svc.store.get("t", job.job_id).takeover == taken.takeover
    with pytest.raises(TakenOver) as refused:
        svc.store.take_over("t", job.job_id, _lock("t:k2", "B", until=NOW + 90), now=NOW + 30)
    assert refused.value.details == {"holder": "t:k1", "until": NOW + 60}
    # Its holder again: the same takeover, renewed (not a second one).
    again = svc.store.take_over("t", job.job_id, _lock("t:k1", "C", until=NOW + 100), now=NOW + 40)
    assert again.takeover is not None
    assert (again.takeover.takeover_id, again.takeover.until) == ("A", NOW + 100)
    # Past its until, anyone of the tenant may take it.
    later = svc.store.take_over("t", job.job_id, _lock("t:k2", "B", until=NOW + 200), now=NOW + 101)
    assert later.takeover is not None and later.takeover.takeover_id == "B"


def test_inputs_push_the_time_and_are_numbered_while_it_lasts(svc: JobServices) -> None:
    job = _running(svc)
    svc.store.take_over("t", job.job_id, _lock("t:k1", "A", until=NOW + 60), now=NOW)
    first = svc.store.touch_takeover(
        "t", job.job_id, "A", holder="t:k1", until=NOW + 70, now=NOW + 10, count_input=True
    )
    second = svc.store.touch_takeover(
        "t", job.job_id, "A", holder="t:k1", until=NOW + 80, now=NOW + 20, count_input=True
    )
    assert (first.seq, second.seq, second.until) == (1, 2, NOW + 80)
    renewed = svc.store.touch_takeover(
        "t", job.job_id, "A", holder="t:k1", until=NOW + 90, now=NOW + 30
    )
    assert renewed.seq == 2  # a renewal numbers nothing
    with pytest.raises(TakeoverNotHeld):  # another takeover's id
        svc.store.touch_takeover("t", job.job_id, "B", holder="t:k1", until=NOW + 95, now=NOW + 30)
    with pytest.raises(TakeoverNotHeld):  # another key of the tenant: not its holder
        svc.store.touch_takeover("t", job.job_id, "A", holder="t:k2", until=NOW + 95, now=NOW + 30)
    with pytest.raises(TakeoverNotHeld):  # its time ran out: a late input is refused
        svc.store.touch_takeover("t", job.job_id, "A", holder="t:k1", until=NOW + 200, now=NOW + 91)
    assert svc.store.get("t", job.job_id).takeover == renewed


def test_handed_back_by_its_holder_and_returned_after_idle_once(svc: JobServices) -> None:
    job = _running(svc)
    svc.store.take_over("t", job.job_id, _lock("t:k1", "A", until=NOW + 60), now=NOW)
    assert svc.store.release_takeover("t", job.job_id, "B") is None  # not this one
    released = svc.store.release_takeover("t", job.job_id, "A")
    assert released is not None and released.takeover_id == "A"
    assert svc.store.release_takeover("t", job.job_id, "A") is None  # again: nothing
    assert svc.store.get("t", job.job_id).takeover is None
    with pytest.raises(TakeoverNotHeld):
        svc.store.touch_takeover("t", job.job_id, "A", holder="t:k1", until=NOW + 70, now=NOW + 1)
    # The idle return: only once its until passed, and only by one of two racing movers.
    svc.store.take_over("t", job.job_id, _lock("t:k1", "C", until=NOW + 60), now=NOW)
    assert svc.store.release_takeover("t", job.job_id, "C", expired_before=NOW + 60) is None
    assert svc.store.release_takeover("t", job.job_id, "C", expired_before=NOW + 61) is not None
    assert svc.store.release_takeover("t", job.job_id, "C", expired_before=NOW + 61) is None


def test_the_worker_reads_it_with_its_cancel_flag(svc: JobServices) -> None:
    job = _running(svc)
    assert svc.store.run_signals("t", job.job_id, now=NOW).takeover is None
    lock = _lock("t:k1", "A", until=NOW + 60)
    svc.store.take_over("t", job.job_id, lock, now=NOW)
    signals = svc.store.run_signals("t", job.job_id, now=NOW + 120)
    assert signals.takeover == lock  # as stored: the worker decides it ran out
    assert signals.cancel_requested is False


def test_only_a_running_job_of_ones_own_tenant(svc: JobServices) -> None:
    queued = submit_job(svc, "t", REQUEST).job
    with pytest.raises(JobNotRunning) as refused:
        svc.store.take_over("t", queued.job_id, _lock("t:k1", "A", until=NOW + 60), now=NOW)
    assert refused.value.details == {"status": "queued"}
    job = _running(svc)
    for move in (
        lambda: svc.store.take_over("o", job.job_id, _lock("o:k", "A", until=NOW + 60), now=NOW),
        lambda: svc.store.touch_takeover(
            "o", job.job_id, "A", holder="o:k", until=NOW + 60, now=NOW
        ),
        lambda: svc.store.release_takeover("o", job.job_id, "A"),
    ):
        with pytest.raises(NotFound):
            move()
    assert svc.store.get("t", job.job_id).takeover is None
    assert svc.store.get("t", queued.job_id).takeover is None
