"""A running job whose worker stopped, claimed by a new attempt (its message came back, or
a take-back's message was claimed before the take-back's move): the claim counts the lost
lease as the take-back would have, once, and at the dead-worker limit the job does not run.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.fakes import FakeClock, FakeQueue
from pagefleet.jobs import sweeper
from pagefleet.jobs.lifecycle import MessageAnswer, Then
from pagefleet.jobs.record import JobMessage, JobRecord
from pagefleet.jobs.rules import LEASE_GRACE_S, LEASES_LOST_LIMIT, lost_lease_error
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from tests.unit.test_lifecycle import HIGH, LEASE, POOL, request


def claim_next(svc: JobServices, queue: str, owner: str) -> MessageAnswer:
    """Play a worker: take a message and claim its job, which must run."""
    [received] = svc.queue.receive(queue, max_messages=1, wait_seconds=0, visibility=LEASE)
    step = svc.lifecycle.claim(received, queue, owner=owner, lease_seconds=LEASE, worker=owner)
    assert step.then is Then.RUN and step.job is not None, step.reason
    return step


def run_once(svc: JobServices, queue: str, owner: str) -> JobRecord:
    job = claim_next(svc, queue, owner).job
    assert job is not None
    return job


def test_a_claim_between_a_take_backs_send_and_its_move_counts_the_lost_lease_once(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a loaded CI run saw: the take-back sends the job's message first, a worker
    claims it (the lease is over) before the take-back's move, and the move is refused.
    The lost lease is counted by the claim: not lost, and not counted twice."""
    job_id = submit_job(svc, "t", request()).job.job_id
    run_once(svc, POOL, "w1")
    clock.advance(LEASE + LEASE_GRACE_S)  # w1 stopped heartbeating
    send = queue.send
    quicker: list[MessageAnswer] = []

    def sent_then_claimed(message: JobMessage, **kwargs: Any) -> str:
        sent = send(message, **kwargs)
        quicker.append(claim_next(svc, HIGH, "w2"))  # before the take-back's move
        return sent

    monkeypatch.setattr(queue, "send", sent_then_claimed)
    taken = sweeper.take_back_expired(svc, now=int(clock.now()))
    monkeypatch.undo()

    assert taken.requeued == 0 and taken.jobs == []  # its move was refused: "alive"
    [step] = quicker
    claimed = step.job
    assert claimed is not None and "attempt 1 stopped" in step.reason  # the worker logs it
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.RUNNING and record.attempt == 2 == claimed.attempt
    assert record.lease_owner == claimed.lease_owner
    assert record.leases_lost == 1 == claimed.leases_lost
    assert record.error == lost_lease_error(1) == claimed.error
    assert record.error.kind == "lease_expired" and "attempt 1" in record.error.message
    # The next look finds a live lease: nothing more is counted.
    assert sweeper.take_back_expired(svc, now=int(clock.now())).requeued == 0
    assert svc.store.get("t", job_id).leases_lost == 1


def lose_leases(svc: JobServices, clock: FakeClock, job_id: str, count: int) -> str:
    """``count`` workers stop on the job, each taken back; returns the queue it is on."""
    queue = POOL
    for lost in range(1, count + 1):
        run_once(svc, queue, f"w{lost}")
        clock.advance(LEASE + LEASE_GRACE_S)
        assert sweeper.take_back_expired(svc, now=int(clock.now())).requeued == 1
        queue = HIGH
    assert svc.store.get("t", job_id).leases_lost == count
    return queue


def test_a_reclaim_that_reaches_the_dead_worker_limit_dead_letters_the_job_unrun(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last worker the limit allows dies between its claim and its message's delete:
    the message comes back once the lease is over, and its claim, the limit's lost lease,
    ends the job as a take-back would have: a dead letter, not a sixth run."""
    job_id = submit_job(svc, "t", request(max_attempts=10)).job.job_id
    on = lose_leases(svc, clock, job_id, LEASES_LOST_LIMIT - 1)
    monkeypatch.setattr(queue, "delete", lambda *a: None)  # the delete never happened
    run_once(svc, on, "last")
    monkeypatch.undo()
    clock.advance(LEASE + 1)  # the message is back, the lease over

    [received] = svc.queue.receive(on, max_messages=1, wait_seconds=0, visibility=LEASE)
    step = svc.lifecycle.claim(received, on, owner="w9", lease_seconds=LEASE, worker="w9")

    assert step.then is Then.DELETE and step.job is None
    assert step.status is JobStatus.DEAD_LETTERED
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.DEAD_LETTERED and record.leases_lost == LEASES_LOST_LIMIT
    assert record.error is not None and record.error.kind == "dead_lettered"
    assert f"stopped {LEASES_LOST_LIMIT} times" in record.error.message
    assert record.lease_owner is None
    assert [j.job_id for j in sweeper.list_dead_letters(svc)] == [job_id]
    assert queue.depth(on) == 0 and queue.depth(POOL) == 0
    assert sweeper.redrive(svc, [("t", job_id)]) == [job_id]
    assert svc.store.get("t", job_id).leases_lost == 0


def test_a_reclaim_below_the_limit_runs_the_job_with_the_lost_lease_counted(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit_job(svc, "t", request(max_attempts=10)).job.job_id
    on = lose_leases(svc, clock, job_id, LEASES_LOST_LIMIT - 2)
    monkeypatch.setattr(queue, "delete", lambda *a: None)
    run_once(svc, on, "dies")
    monkeypatch.undo()
    clock.advance(LEASE + 1)
    job = run_once(svc, on, "next")
    assert job.leases_lost == LEASES_LOST_LIMIT - 1
    assert job.error == lost_lease_error(job.attempt - 1)
    assert svc.store.get("t", job_id).status is JobStatus.RUNNING


class Counted:
    """The worker metrics ``noted`` writes to, as calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def job_finished(self, status: str, duration_ms: float) -> None:
        self.calls.append(("finished", status))

    def dead_lettered(self, count: int) -> None:
        self.calls.append(("dead_lettered", count))

    def sessions_lost(self, count: int) -> None:
        self.calls.append(("sessions_lost", count))


def test_a_worker_counts_a_job_its_claim_dead_lettered_where_the_alarm_reads() -> None:
    from browser_task.observe.telemetry import JobLog, noted

    metrics = Counted()
    answer = MessageAnswer(
        Then.DELETE, reason="its workers stopped", status=JobStatus.DEAD_LETTERED
    )
    noted(answer, JobLog(), metrics)  # type: ignore[arg-type]
    noted(MessageAnswer(Then.DELETE, status=JobStatus.FAILED), JobLog(), metrics)  # type: ignore[arg-type]
    assert metrics.calls == [
        ("finished", "dead_lettered"),
        ("dead_lettered", 1),
        ("finished", "failed"),
    ]


def test_a_reclaim_at_the_limit_with_a_step_at_stake_goes_to_review_not_a_dead_letter(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As its take-back would: a person looks, rather than a blind redrive from the start."""
    from tests.unit.test_irreversible_lifecycle import lose_the_worker, reclaim, started

    job, _ = started(svc, check=True, max_attempts=10)
    for n in range(LEASES_LOST_LIMIT - 2):  # each next attempt would check the step
        assert reclaim(svc, lose_the_worker(svc, queue, clock), f"w{n}").then is Then.RUN
    back = lose_the_worker(svc, queue, clock)
    monkeypatch.setattr(queue, "delete", lambda *a: None)  # its worker dies before the delete
    assert reclaim(svc, back, "dies").then is Then.RUN
    monkeypatch.undo()
    clock.advance(LEASE + 1)

    step = reclaim(
        svc, svc.queue.receive(HIGH, max_messages=1, wait_seconds=0, visibility=LEASE)[0], "w9"
    )

    assert step.then is Then.DELETE and step.status is JobStatus.NEEDS_REVIEW
    record = svc.store.get("t", job.job_id)
    assert record.status is JobStatus.NEEDS_REVIEW and record.leases_lost == LEASES_LOST_LIMIT
    assert record.error is not None and record.error.kind == "needs_review"
    assert f"stopped {LEASES_LOST_LIMIT} times" in record.error.message
    # Why the step was not checked: the job does not run again (its budget is not spent).
    assert "it is not run again before its check" in record.error.message
    assert "max_attempts" not in record.error.message
    assert [c.state for c in record.checkpoints] == ["unknown"]
    assert sweeper.list_dead_letters(svc) == []


def test_a_sessions_message_claimed_after_its_worker_stopped_ends_it_as_a_lost_session(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's worker died after its claim but before the message's delete: the copy
    that comes back finds the lease over. The session cannot move to another worker (its
    page died with it): it fails with lease_expired, and the worker counts it where the
    BrowserSessionsLost alarm reads, as a take-back of it would."""
    from browser_task.observe.telemetry import JobLog, noted
    from pagefleet.jobs.session_terms import SessionTerms

    session = request(max_attempts=1).model_copy(update={"session": SessionTerms()})
    job_id = submit_job(svc, "t", session).job.job_id
    monkeypatch.setattr(queue, "delete", lambda *a: None)  # its worker dies before the delete
    run_once(svc, POOL, "dies")
    monkeypatch.undo()
    clock.advance(LEASE + 1)
    [copy] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    answer = svc.lifecycle.claim(copy, POOL, owner="next", lease_seconds=LEASE, worker="next")

    assert answer.job is None and answer.status is JobStatus.FAILED and answer.session_lost
    record = svc.store.get("t", job_id)
    assert record.error is not None and record.error.kind == "lease_expired"
    metrics = Counted()
    noted(answer, JobLog(), metrics)  # type: ignore[arg-type]
    assert ("sessions_lost", 1) in metrics.calls
