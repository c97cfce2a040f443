"""The worker's side of the lease (browser_task.slot.leases), on the in-memory fakes: a finished
job's lease lasts until its outcome is written, and each worker takes back its pool's jobs
whose worker died, looking again when the next lease ends."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from browser_task.observe.task_protection import TaskProtection
from browser_task.observe.telemetry import JobLog, WorkerMetrics
from browser_task.observe.usage import AttemptMeter
from browser_task.slot.completion import Completion
from browser_task.slot.leases import MIN_WAIT_S, LeaseKeeper, LeaseWatch
from devstack.fakes import FakeClock
from pagefleet.jobs import sweeper
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import LEASE_GRACE_S, LEASE_MARGIN_S, LEASES_LOST_LIMIT
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus

POOL = "standard"
LEASE = 10
REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


class NoSpread(random.Random):
    def random(self) -> float:
        return 0.0


def claimed(svc: JobServices, owner: str = "w1", queue: str = POOL) -> JobRecord:
    [received] = svc.queue.receive(queue, max_messages=1, wait_seconds=0, visibility=LEASE)
    step = svc.lifecycle.claim(received, queue, owner=owner, lease_seconds=LEASE, worker=owner)
    assert step.job is not None, step.reason
    return step.job


class SlowEvents:
    """A run's events whose last write takes as long as the test says (``done``)."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.emitted: list[Any] = []

    def emit(self, *args: Any, **fields: Any) -> None:
        self.emitted.append((args, fields))

    async def close(self) -> None:
        await self.done.wait()


def completion(svc: JobServices) -> Completion:
    def no_tenant_data(tenant_id: str) -> Any:
        raise LookupError("no usage store in this test")

    return Completion(
        svc.lifecycle,
        "w1",
        breaker=None,  # type: ignore[arg-type]  # no target origin: never asked
        tenant_data=no_tenant_data,
        protection=TaskProtection(agent_uri=""),
        metrics=WorkerMetrics(POOL),
        clock=svc.clock.now,
    )


def test_a_finished_jobs_lease_is_kept_until_its_outcome_is_written(
    svc: JobServices, clock: FakeClock
) -> None:
    """The run ended; its last events and its outcome take longer than a lease to write
    (a slow table, retried calls). The job must not look abandoned meanwhile: before, the
    heartbeat stopped with the run, the lease ran out, the job was taken back and run
    again, and the first outcome was refused (a hang ended lease_expired, not timed_out)."""
    job_id = submit_job(svc, "t", REQUEST).job.job_id
    job = claimed(svc)

    async def scenario() -> None:
        keeper = LeaseKeeper(svc.lifecycle, job, lease_s=LEASE, every_s=0.01, log=JobLog())
        keeper.start()
        events = SlowEvents()
        run: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        run.set_result(Outcome(JobStatus.SUCCEEDED, result={"title": "ok"}))
        settle = asyncio.create_task(
            completion(svc).settle(
                run,
                job,
                keeper,
                0.0,
                None,
                frozenset(),
                JobLog(),
                AttemptMeter(),
                events,  # type: ignore[arg-type]
            )
        )
        for _ in range(6):  # three leases go by while the events are written
            clock.advance(LEASE / 2)
            await asyncio.sleep(0.1)  # the keeper beats in between
            now = int(clock.now())
            assert sweeper.take_back_expired(svc, now=now).requeued == 0
        events.done.set()
        await settle
        clock.advance(LEASE * 3)  # and once written, nothing holds it any more
        assert sweeper.take_back_expired(svc, now=int(clock.now())).requeued == 0

    asyncio.run(scenario())
    record = svc.store.get("t", job_id)
    assert record.status is JobStatus.SUCCEEDED and record.attempt == 1
    assert record.result == {"title": "ok"}


def watch(svc: JobServices, dead: list[int] | None = None) -> LeaseWatch:
    return LeaseWatch(
        svc,
        pool=POOL,
        lease_s=LEASE,
        log=JobLog(),
        on_dead_lettered=(dead if dead is not None else []).append,
        rng=NoSpread(),
    )


def test_the_watch_looks_again_when_the_next_lease_ends(svc: JobServices, clock: FakeClock) -> None:
    idle = watch(svc)
    # Nothing runs: a job claimed now holds a lease of LEASE - margin at least.
    assert idle.look() == LEASE - LEASE_MARGIN_S
    submit_job(svc, "t", REQUEST)
    job = claimed(svc)
    assert job.lease_expires_at == int(clock.now()) + LEASE - LEASE_MARGIN_S
    # Its lease ends in 8 s: look again 8 s + the grace from now.
    assert idle.look() == LEASE - LEASE_MARGIN_S  # capped by the horizon (also 8 s)
    clock.advance(5)
    assert idle.look() == LEASE - LEASE_MARGIN_S - 5 + LEASE_GRACE_S
    svc.lifecycle.heartbeat(job, lease_seconds=LEASE)  # pushed out: later
    assert idle.look() == LEASE - LEASE_MARGIN_S
    clock.advance(LEASE - LEASE_MARGIN_S + 0.5)  # just ended, within the grace: soon
    wait = idle.look()
    assert MIN_WAIT_S <= wait <= LEASE_GRACE_S
    assert svc.store.get("t", job.job_id).status is JobStatus.RUNNING
    clock.advance(wait)  # the grace is over, to the second: taken back then, not later
    idle.look()
    assert svc.store.get("t", job.job_id).status is JobStatus.RETRY_SCHEDULED


def test_the_watch_takes_back_its_pools_dead_jobs_and_counts_dead_letters(
    svc: JobServices, clock: FakeClock
) -> None:
    dead: list[int] = []
    looker = watch(svc, dead)
    poison = submit_job(svc, "t", REQUEST.model_copy(update={"max_attempts": 10})).job.job_id
    submit_job(svc, "t", REQUEST.model_copy(update={"pool": "heavy"}))
    claimed(svc, queue="heavy")  # another pool's: left to its own workers or the sweeper
    queue = POOL
    for n in range(LEASES_LOST_LIMIT):
        claimed(svc, f"w{n}", queue)
        queue = f"{POOL}-high"  # taken back ahead of the queue
        clock.advance(LEASE + LEASE_GRACE_S)
        assert looker.look() >= MIN_WAIT_S
    assert svc.store.get("t", poison).status is JobStatus.DEAD_LETTERED
    assert dead == [1]
    heavy = [j for j in svc.store.all_jobs() if j.pool == "heavy"]
    assert [j.status for j in heavy] == [JobStatus.RUNNING]
