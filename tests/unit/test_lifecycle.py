"""Lifecycle decisions on in-memory fakes: what happens to a job and to its message.

Each test plays the parts (API, worker, sweeper, DLQ) through ``Lifecycle`` alone, moving a
fake clock instead of sleeping; the contract suite holds the fakes to the AWS adapters.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from devstack.fakes import FakeClock, FakeQueue
from pagefleet.errors import EnqueueFailed, JobNotCancellable
from pagefleet.jobs import sweeper
from pagefleet.jobs.lifecycle import Outcome, Then
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.rules import LEASE_GRACE_S, LEASES_LOST_LIMIT, RETRY_GRACE_S
from pagefleet.jobs.service import JobServices, requeue_unqueued, submit_job
from pagefleet.jobs.states import JobStatus

POOL = "standard"
HIGH = "standard-high"
LEASE = 60


def request(**extra: object) -> JobRequest:
    return JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}], **extra}
    )


def receive(svc: JobServices) -> ReceivedMessage:
    [received] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    return received


def claim(svc: JobServices, received: ReceivedMessage, owner: str = "w1"):
    return svc.lifecycle.claim(received, POOL, owner=owner, lease_seconds=LEASE, worker=owner)


def run_once(svc: JobServices, owner: str = "w1") -> tuple[JobRecord, ReceivedMessage]:
    """Play a worker: take messages until one claims a job to run."""
    return run_once_from(svc, POOL, owner)


def run_once_from(
    svc: JobServices, queue: str, owner: str = "w1"
) -> tuple[JobRecord, ReceivedMessage]:
    while True:
        [received] = svc.queue.receive(queue, max_messages=1, wait_seconds=0, visibility=LEASE)
        step = svc.lifecycle.claim(received, queue, owner=owner, lease_seconds=LEASE, worker=owner)
        if step.then is Then.RUN:
            assert step.job is not None
            return step.job, received
        assert step.then is Then.DELETE, step.reason


def failure(retryable: bool = True) -> JobError:
    return JobError(kind="navigation_failed", message="connection reset", retryable=retryable)


def test_submit_records_then_queues_and_a_replay_returns_the_same_job(
    svc: JobServices, queue: FakeQueue
) -> None:
    first = submit_job(svc, "t", request(), idempotency_key="k")
    again = submit_job(svc, "t", request(), idempotency_key="k")
    assert first.created and not again.created
    assert again.job.job_id == first.job.job_id
    assert [m.job_id for m in queue.visible(POOL)] == [first.job.job_id]
    assert svc.store.get("t", first.job.job_id).enqueued_at is not None


def test_a_failed_enqueue_is_finished_by_the_sweeper(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> str:
        raise ConnectionError("queue down")

    monkeypatch.setattr(queue, "send", broken)
    with pytest.raises(EnqueueFailed):
        submit_job(svc, "t", request())
    monkeypatch.undo()
    assert requeue_unqueued(svc) == 0  # too fresh: its own client may still retry
    clock.advance(61)
    assert requeue_unqueued(svc) == 1
    assert queue.depth(POOL) == 1


def test_a_claimed_jobs_message_is_deleted_at_once_and_the_lease_holds_the_job(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    submitted = submit_job(svc, "t", request()).job
    job, _ = run_once(svc)
    assert job.status is JobStatus.RUNNING and job.attempt == 1
    # Nothing of a running job is left in SQS: no in-flight message ages with the run.
    assert queue.depth(POOL) == 0
    clock.advance(15 * 60)  # a long job, its lease kept by heartbeats
    for _ in range(20):
        svc.lifecycle.heartbeat(job, lease_seconds=LEASE)
        clock.advance(LEASE / 2)
    assert queue.depth(POOL) == 0 and queue.visible(POOL) == []
    done = svc.lifecycle.finish(job, Outcome(JobStatus.SUCCEEDED, result={"a": 1}), "w1")
    assert done.then is Then.DELETE and done.status is JobStatus.SUCCEEDED
    record = svc.store.get("t", submitted.job_id)
    assert record.status is JobStatus.SUCCEEDED and record.result == {"a": 1}
    assert [a.worker for a in record.attempts] == ["w1"]
    assert queue.depth(POOL) == 0


def test_a_worker_deletes_the_claimed_message_off_the_jobs_path(
    svc: JobServices, queue: FakeQueue
) -> None:
    later: list[tuple[Any, ...]] = []
    svc.lifecycle.later = lambda work, *args: later.append((work, *args))
    submit_job(svc, "t", request())
    job, _ = run_once(svc)
    assert job.status is JobStatus.RUNNING and queue.depth(POOL) == 1  # not yet
    [(work, *args)] = later
    work(*args)  # the worker's background thread
    assert queue.depth(POOL) == 0


def test_a_duplicate_of_a_finished_job_is_deleted_unrun(svc: JobServices, queue: FakeQueue) -> None:
    job = submit_job(svc, "t", request()).job
    queue.send(queue.visible(POOL)[0])  # SQS delivered the message twice
    running, _ = run_once(svc)
    svc.lifecycle.finish(running, Outcome(JobStatus.SUCCEEDED), "w1")
    duplicate = receive(svc)
    # The message carries what the worker needs before the claim: its look reads nothing,
    # and the claim's refusal drops the copy.
    assert duplicate.message is not None and duplicate.message.preview is not None
    peek = svc.lifecycle.peek(duplicate, POOL)
    assert peek.then is Then.RUN and peek.job is None and peek.preview is not None
    step = claim(svc, duplicate, "w2")
    assert step.then is Then.DELETE and step.reason == "duplicate delivery (succeeded)"
    assert queue.depth(POOL) == 0
    assert svc.store.get("t", job.job_id).attempt == 1
    # A message without a preview (sent before they were carried) is looked at in the record.
    [(again, _)] = queue.sent[:1]
    queue.send(again.model_copy(update={"preview": None}))
    peek = svc.lifecycle.peek(receive(svc), POOL)
    assert peek.then is Then.DELETE and peek.reason == "duplicate delivery (succeeded)"


def test_a_copy_of_a_running_job_is_deleted_the_lease_brings_the_job_back(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    queue.send(queue.visible(POOL)[0])  # SQS delivered the message twice
    run_once(svc, "w1")
    step = claim(svc, receive(svc), "w2")
    assert step.then is Then.DELETE and "running elsewhere" in step.reason
    assert queue.depth(POOL) == 0
    # w1 dies: its lease runs out and the job is taken back, ahead of the queue.
    clock.advance(LEASE + LEASE_GRACE_S)
    assert sweeper.take_back_expired(svc, now=int(clock.now())).requeued == 1
    assert [m.job_id for m in queue.visible(HIGH)] == [job_id]


def test_a_retryable_failure_is_retried_after_backoff_until_the_budget_is_spent(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    job_id = submit_job(svc, "t", request(max_attempts=2)).job.job_id
    job, _ = run_once(svc)
    outcome = svc.lifecycle.after_failure(job, failure())
    assert outcome.status is JobStatus.RETRY_SCHEDULED
    assert outcome.retry_delay_s is not None
    svc.lifecycle.finish(job, outcome, "w1")
    assert svc.store.get("t", job_id).status is JobStatus.RETRY_SCHEDULED
    assert queue.sent[-1][1] == outcome.retry_delay_s  # the retry message waits its backoff
    clock.advance(outcome.retry_delay_s + 1)
    second, _ = run_once(svc, "w2")
    assert second.attempt == 2
    last = svc.lifecycle.after_failure(second, failure())
    assert last.status is JobStatus.FAILED  # max_attempts=2 is spent
    svc.lifecycle.finish(second, last, "w2")
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.FAILED
    assert [a.attempt for a in record.attempts] == [1, 2]


def test_a_permanent_failure_fails_at_once(svc: JobServices) -> None:
    submit_job(svc, "t", request(max_attempts=5))
    job, _ = run_once(svc)
    assert svc.lifecycle.after_failure(job, failure(retryable=False)).status is JobStatus.FAILED


def test_an_early_copy_of_a_retry_is_hidden_until_the_retry_is_due(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    submit_job(svc, "t", request())
    job, _ = run_once(svc)
    outcome = Outcome(JobStatus.RETRY_SCHEDULED, error=failure(), retry_delay_s=100)
    svc.lifecycle.finish(job, outcome, "w1")
    # The retry's message waits out its backoff; a copy arrives now (a duplicate delivery).
    svc.lifecycle.send(svc.store.get("t", job.job_id))
    early = receive(svc)
    step = claim(svc, early, "w2")
    assert step.then is Then.HIDE and "not due" in step.reason
    clock.advance(101)
    assert claim(svc, receive(svc), "w2").then is Then.RUN


def test_a_paused_worker_can_write_nothing_after_its_job_was_reclaimed(
    svc: JobServices, clock: FakeClock
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    stale, _ = run_once(svc, "w1")
    clock.advance(LEASE + LEASE_GRACE_S)  # w1 paused; its lease is taken back
    sweeper.take_back_expired(svc, now=int(clock.now()))
    fresh, _ = run_once_from(svc, HIGH, "w2")
    assert fresh.attempt == 2
    with pytest.raises(Exception, match="lease"):
        svc.lifecycle.heartbeat(stale, lease_seconds=LEASE)
    late = svc.lifecycle.finish(stale, Outcome(JobStatus.FAILED, error=failure()), "w1")
    assert late.then is Then.LEAVE and late.status is None
    svc.lifecycle.finish(fresh, Outcome(JobStatus.SUCCEEDED), "w2")
    assert svc.store.get("t", job_id).status is JobStatus.SUCCEEDED


def test_a_heartbeat_keeps_the_lease_so_the_job_is_never_taken_back(
    svc: JobServices, clock: FakeClock
) -> None:
    submit_job(svc, "t", request())
    job, _ = run_once(svc)
    for _ in range(5):
        clock.advance(LEASE - 10)
        assert svc.lifecycle.heartbeat(job, lease_seconds=LEASE) == []
        assert sweeper.take_back_expired(svc, now=int(clock.now())).requeued == 0
    assert svc.store.get("t", job.job_id).attempt == 1


def test_a_copy_that_comes_back_after_its_worker_died_reclaims_the_job(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker died between its claim and the message's delete: the message comes back
    after its visibility, the lease has run out, and the copy claims the job again; past
    the attempt budget, the job fails."""
    job_id = submit_job(svc, "t", request(max_attempts=1)).job.job_id
    monkeypatch.setattr(queue, "delete", lambda *a: None)  # the delete never happened
    run_once(svc, "w1")
    monkeypatch.undo()
    clock.advance(LEASE + 1)
    step = claim(svc, receive(svc), "w2")
    assert step.then is Then.DELETE and step.status is JobStatus.FAILED
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.FAILED and record.error is not None
    assert record.error.kind == "lease_expired"
    assert queue.depth(POOL) == 0


def test_a_job_past_its_deadline_expires_unrun(svc: JobServices, clock: FakeClock) -> None:
    from datetime import UTC, datetime, timedelta

    deadline = datetime.fromtimestamp(clock.now(), UTC) + timedelta(seconds=30)
    job_id = submit_job(svc, "t", request(deadline=deadline.isoformat())).job.job_id
    clock.advance(31)
    step = claim(svc, receive(svc))
    assert step.then is Then.DELETE and step.status is JobStatus.EXPIRED
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.EXPIRED and record.attempt == 0
    assert record.error is not None and record.error.timeout == "deadline"


def test_a_deferred_job_waits_without_spending_an_attempt(
    svc: JobServices, queue: FakeQueue
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    received = receive(svc)
    step = svc.lifecycle.defer(received, POOL, reason="circuit open for x", delay_s=40)
    assert step.then is Then.DELETE
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.QUEUED and record.attempt == 0
    assert record.deferred_reason == "circuit open for x"
    assert queue.sent[-1][1] == 40 and queue.depth(POOL) == 1


def test_a_deferred_jobs_other_messages_are_dropped_while_its_successor_waits(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    # SQS delivers a message twice now and then (the same MessageId). Both copies of a job's
    # message found its breaker open: each deferred it into a successor of its own, and each
    # successor could be copied again, so an outage multiplied a job's messages. While the
    # successor the record names waits, the job's other messages are dropped.
    job_id = submit_job(svc, "t", request()).job.job_id
    first = without_preview(receive(svc))
    second = replace(first, receipt_handle="another copy")
    assert svc.lifecycle.defer(first, POOL, reason="circuit open", delay_s=5).then is Then.DELETE
    assert len(queue.sent) == 2  # the submission's message and its successor
    peek = svc.lifecycle.peek(second, POOL)
    assert peek.then is Then.DELETE and "already deferred" in peek.reason
    assert len(queue.sent) == 2 and queue.depth(POOL) == 1
    # The successor carries the job on, and when it is due any message is looked at again
    # (a stray one then is claimed or dropped by the usual rules).
    clock.advance(5)
    [successor] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    assert successor.message_id == svc.store.get("t", job_id).deferred_to
    looked = svc.lifecycle.peek(successor, POOL)
    assert looked.then is Then.RUN and looked.job is not None and looked.job.job_id == job_id
    assert svc.lifecycle.peek(second, POOL).then is Then.RUN


def without_preview(received: ReceivedMessage) -> ReceivedMessage:
    assert received.message is not None
    return replace(received, message=received.message.model_copy(update={"preview": None}))


def test_a_copy_of_a_previewed_message_may_defer_again_but_the_job_keeps_one_line(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    # A message with a preview is not looked at in the record, so a copy of a job's first
    # message is not dropped while the job's successor waits: it is deferred again, and its
    # own successor is named. A successor is always looked at in the record
    # (``JobMessage.preview_carried``): the one named before is dropped, so a job never has
    # two lines of successors.
    job_id = submit_job(svc, "t", request()).job.job_id
    first = receive(svc)
    second = replace(first, receipt_handle="another copy")
    assert svc.lifecycle.defer(first, POOL, reason="circuit open", delay_s=5).then is Then.DELETE
    clock.advance(1)
    assert svc.lifecycle.peek(second, POOL).then is Then.RUN  # no read: nothing to drop it
    assert svc.lifecycle.defer(second, POOL, reason="circuit open", delay_s=5).then is Then.DELETE
    clock.advance(4)
    [older] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    assert older.message is not None and older.message.deferrals == 1
    assert older.message.preview_carried is None
    dropped = svc.lifecycle.peek(older, POOL)
    assert dropped.then is Then.DELETE and "already deferred" in dropped.reason
    clock.advance(1)
    [named] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    assert named.message_id == svc.store.get("t", job_id).deferred_to
    assert svc.lifecycle.peek(named, POOL).then is Then.RUN
    assert claim(svc, named).then is Then.RUN and queue.depth(POOL) == 0


def test_a_deferral_whose_successor_was_not_sent_names_none_and_drops_nothing(
    svc: JobServices, queue: FakeQueue
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    first = receive(svc)

    def unsent(*_: Any, **__: Any) -> str:
        raise EnqueueFailed("SQS unreachable")

    queue.send = unsent  # type: ignore[method-assign]
    step = svc.lifecycle.defer(first, POOL, reason="circuit open", delay_s=5)
    assert step.then is Then.LEAVE  # the message comes back and is deferred then
    assert svc.store.get("t", job_id).deferred_to is None
    assert svc.lifecycle.peek(replace(first, receipt_handle="again"), POOL).then is Then.RUN


def test_cancel_queued_at_once_running_through_the_worker_final_refused(
    svc: JobServices,
) -> None:
    queued = submit_job(svc, "t", request()).job
    assert svc.lifecycle.cancel("t", queued.job_id).status is JobStatus.CANCELLED
    with pytest.raises(JobNotCancellable):
        svc.lifecycle.cancel("t", queued.job_id)
    submit_job(svc, "t", request())
    job, _ = run_once(svc)
    flagged = svc.lifecycle.cancel("t", job.job_id)
    assert flagged.status is JobStatus.RUNNING and svc.lifecycle.run_signals(job).cancel_requested


def test_dead_letters_are_marked_unless_a_worker_still_holds_the_job(
    svc: JobServices, clock: FakeClock
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    _, received = run_once(svc)
    assert svc.lifecycle.dead_letter(received) == "alive"
    clock.advance(LEASE + 1)
    assert svc.lifecycle.dead_letter(received) == "marked"
    assert svc.store.get("t", job_id).status is JobStatus.DEAD_LETTERED
    assert svc.lifecycle.dead_letter(received) == "already_final"
    poison = ReceivedMessage(None, "r", "m", 6, 0, "not json")
    assert svc.lifecycle.dead_letter(poison) == "poison"
    assert [j.job_id for j in sweeper.list_dead_letters(svc)] == [job_id]


def test_a_redriven_job_gets_its_whole_budget_back(svc: JobServices, clock: FakeClock) -> None:
    job_id = submit_job(svc, "t", request(max_attempts=1)).job.job_id
    _, received = run_once(svc)
    clock.advance(LEASE + 1)
    svc.lifecycle.dead_letter(received)
    assert sweeper.redrive(svc, [("t", job_id), ("t", "nosuchjob")]) == [job_id]
    job, _ = run_once(svc, "w2")
    assert job.attempt == 2 and job.attempts_used == 1  # allowed: budget restored


def test_the_sweeper_takes_back_a_dead_workers_job_ahead_of_the_queue(
    svc: JobServices, clock: FakeClock
) -> None:
    retried = submit_job(svc, "t", request(max_attempts=2)).job.job_id
    spent = submit_job(svc, "t", request(max_attempts=1)).job.job_id
    for _ in range(2):  # both workers die
        run_once(svc, "w1")
    waiting = submit_job(svc, "t", request()).job.job_id
    clock.advance(LEASE + LEASE_GRACE_S)
    report = sweeper.sweep(svc)
    assert (report.leases_recovered, report.leases_failed) == (1, 1)
    record = svc.store.get("t", retried)
    assert record.status is JobStatus.RETRY_SCHEDULED and record.leases_lost == 1
    assert svc.store.get("t", spent).status is JobStatus.FAILED
    # It waited its turn once: it goes before the job that is still waiting for its first.
    assert [m.job_id for m in svc.queue.visible(HIGH)] == [retried]
    assert [m.job_id for m in svc.queue.visible(POOL)] == [waiting]


def test_a_take_back_sends_first_so_a_taker_that_dies_loses_nothing(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    run_once(svc, "w1")
    clock.advance(LEASE + LEASE_GRACE_S)  # w1 died
    monkeypatch.setattr(queue, "send", lambda *a, **k: (_ for _ in ()).throw(OSError("down")))
    assert sweeper.take_back_expired(svc, now=clock.now()).requeued == 0  # SQS down: later
    assert svc.store.get("t", job_id).status is JobStatus.RUNNING
    monkeypatch.undo()

    def dies(*args: object, **kwargs: object) -> None:
        raise SystemExit("the taker was killed after its send")

    monkeypatch.setattr(svc.store, "transition", dies)
    with pytest.raises(SystemExit):
        sweeper.take_back_expired(svc, now=clock.now())
    monkeypatch.undo()
    # The message it sent first reclaims the job, whose lease is over.
    again, _ = run_once_from(svc, HIGH, "w2")
    assert again.job_id == job_id and again.attempt == 2


def test_a_workers_lease_watch_takes_back_only_its_own_pools_jobs(
    svc: JobServices, clock: FakeClock
) -> None:
    mine = submit_job(svc, "t", request()).job.job_id
    heavy = submit_job(svc, "t", request(pool="heavy")).job.job_id
    run_once(svc, "w1")
    run_once_from(svc, "heavy", "w1")
    clock.advance(LEASE + LEASE_GRACE_S)
    taken = sweeper.take_back_expired(svc, now=int(clock.now()), pool=POOL)
    assert taken.requeued == 1
    assert svc.store.get("t", mine).status is JobStatus.RETRY_SCHEDULED
    assert svc.store.get("t", heavy).status is JobStatus.RUNNING  # heavy's own, or the sweeper


def test_a_job_whose_workers_keep_dying_is_dead_lettered_and_redriven_with_a_fresh_count(
    svc: JobServices, clock: FakeClock
) -> None:
    """What SQS's maxReceiveCount did while a message stayed in flight for its whole run:
    a job that kills its worker every time stops after LEASES_LOST_LIMIT workers."""
    job_id = submit_job(svc, "t", request(max_attempts=10)).job.job_id
    queue = POOL
    for lost in range(1, LEASES_LOST_LIMIT + 1):
        run_once_from(svc, queue, f"w{lost}")
        clock.advance(LEASE + LEASE_GRACE_S)  # that worker was killed
        taken = sweeper.take_back_expired(svc, now=int(clock.now()))
        queue = HIGH
        if lost < LEASES_LOST_LIMIT:
            assert taken.requeued == 1, lost
    assert taken.dead_lettered == 1
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.DEAD_LETTERED and record.error is not None
    assert record.error.kind == "dead_lettered" and "stopped 5 times" in record.error.message
    assert record.attempt == LEASES_LOST_LIMIT < record.request.max_attempts
    assert svc.queue.visible(HIGH) == []
    assert [j.job_id for j in sweeper.list_dead_letters(svc)] == [job_id]
    assert sweeper.redrive(svc, [("t", job_id)]) == [job_id]
    assert svc.store.get("t", job_id).leases_lost == 0


def test_a_stopping_workers_job_is_handed_back_at_once_ahead_of_the_queue(
    svc: JobServices, queue: FakeQueue
) -> None:
    job_id = submit_job(svc, "t", request()).job.job_id
    job, _ = run_once(svc)
    interrupted = JobError(kind="interrupted", message="worker stopping", retryable=True)
    outcome = Outcome(JobStatus.RETRY_SCHEDULED, error=interrupted, release_message=True)
    step = svc.lifecycle.finish(job, outcome, "w1")
    assert step.status is JobStatus.RETRY_SCHEDULED
    assert queue.sent[-1] == (queue.visible(HIGH)[0], 0)
    assert queue.visible(HIGH)[0].job_id == job_id
    again, _ = run_once_from(svc, HIGH, "w2")
    assert again.attempt == 2


def test_the_sweeper_resends_a_lost_retry_and_expires_overdue_jobs(
    svc: JobServices, clock: FakeClock
) -> None:
    from datetime import UTC, datetime, timedelta

    job_id = submit_job(svc, "t", request()).job.job_id
    job, _ = run_once(svc)
    svc.lifecycle.finish(
        job, Outcome(JobStatus.RETRY_SCHEDULED, error=failure(), retry_delay_s=5), "w1"
    )
    clock.advance(6)
    lost = receive(svc)  # the retry's message is received, then lost with its worker
    svc.queue.delete(POOL, lost.receipt_handle)
    assert svc.queue.visible(POOL) == []
    deadline = datetime.fromtimestamp(clock.now(), UTC) + timedelta(seconds=10)
    late_id = submit_job(svc, "t", request(deadline=deadline.isoformat())).job.job_id
    clock.advance(RETRY_GRACE_S + 10)
    report = sweeper.sweep(svc)
    assert report.retries_resent == 1 and report.expired == 1
    assert svc.store.get("t", late_id).status is JobStatus.EXPIRED
    assert [m.job_id for m in svc.queue.visible(HIGH)].count(job_id) == 1
    assert sweeper.sweep(svc).retries_resent == 0  # looked at again only later
    # ...but the retry itself is due: its re-sent message starts it at once.
    retried, _ = run_once_from(svc, HIGH, "w2")
    assert retried.job_id == job_id and retried.attempt == 2


def test_a_message_received_too_often_moves_to_the_dead_letter_queue(
    svc: JobServices, queue: FakeQueue, clock: FakeClock
) -> None:
    submit_job(svc, "t", request())
    for _ in range(5):
        receive(svc)
        clock.advance(LEASE + 1)
    assert svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE) == []
    assert len(queue.dead_letters[POOL]) == 1


def test_the_sweeper_reports_how_long_a_lease_it_cannot_take_back_has_been_over(
    svc: JobServices, queue: FakeQueue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim deleted the message: only this figure shows a job stuck `running`."""
    assert sweeper.sweep(svc).oldest_expired_lease_s == 0
    job_id = submit_job(svc, "t", request()).job.job_id
    run_once(svc, "w1")
    assert sweeper.sweep(svc).oldest_expired_lease_s == 0  # the lease still holds
    clock.advance(LEASE + LEASE_GRACE_S + 100)  # w1 died long ago
    monkeypatch.setattr(queue, "send", lambda *a, **k: (_ for _ in ()).throw(OSError("down")))
    stuck = sweeper.sweep(svc)
    assert stuck.leases_recovered == 0 and svc.store.get("t", job_id).status is JobStatus.RUNNING
    ended = svc.store.get("t", job_id).lease_expires_at
    assert ended is not None and stuck.oldest_expired_lease_s == int(clock.now()) - ended
    assert stuck.oldest_expired_lease_s >= LEASE_GRACE_S + 100
    monkeypatch.undo()
    assert sweeper.sweep(svc).oldest_expired_lease_s == 0  # taken back: nothing is over
