"""Browser sessions on the fakes: a session is a job (admission, slots, lease, lifecycle),
its commands are recorded in the ledger and its worker woken through its inbox, a dead
worker makes it `lost`, never a hang."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from browser_task.run.inbox import WorkerInbox
from browser_task.run.session_loop import SessionLoop
from devstack.fakes import FakeClock
from devstack.fakes.session_commands import FakeCommandLedger
from devstack.fakes.session_inbox import FakeInboxRegistry, FakeSessionInbox
from devstack.fakes.tenancy import fake_tenancy
from devstack.fakes.workflows import FakeWorkflowStore
from pagefleet.browsing import answer_times, service, stepping
from pagefleet.browsing.inbox import Wakeup
from pagefleet.browsing.models import (
    Answer,
    Command,
    CommandView,
    Observation,
    OpenSession,
    SaveAsWorkflow,
    StepsAnswer,
    StepsRequest,
)
from pagefleet.browsing.recording import parametrize
from pagefleet.errors import (
    IdempotencyKeyReused,
    InvalidField,
    NotFound,
    SessionEnded,
    TooManyRequests,
)
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.pricing import Worker
from pagefleet.specs.resources import claim_owner, inbox_name
from pagefleet.workflow import STEP_ADAPTER, Step
from pagefleet.workflow.masking import Masker
from pagefleet.workflow.versions import resolve

TENANT = "acme"
POOL = "standard"
LEASE = 60


@dataclasses.dataclass
class World:
    sessions: service.Sessions
    inbox: FakeSessionInbox
    worker: WorkerInbox  # the inbox of worker "w1", which claims the sessions here
    commands: FakeCommandLedger
    clock: FakeClock
    lost: list[str]


@pytest.fixture
def world() -> Iterator[World]:
    clock = FakeClock()
    svc, tenancy = fake_tenancy(clock)
    svc = dataclasses.replace(svc, workflows=FakeWorkflowStore())
    inbox = FakeSessionInbox()
    commands = FakeCommandLedger()
    lost: list[str] = []
    sessions = service.Sessions(
        svc,
        tenancy.quotas,
        inbox,
        commands=commands,
        stage="dev",
        max_wait_s=2.0,
        on_lost=lambda job: lost.append(job.job_id),
    )
    worker = WorkerInbox(inbox, FakeInboxRegistry(), inbox_name("dev", "w1"), poll_s=1)
    worker.start()
    yield World(sessions, inbox, worker, commands, clock, lost)
    worker.stop()


def steps_request(*steps: dict[str, object], **fields: object) -> StepsRequest:
    return StepsRequest.model_validate({"steps": list(steps), **fields})


def step(raw: dict[str, object]) -> Step:
    return STEP_ADAPTER.validate_python(raw)


def claimed(world: World, worker: str = "w1") -> tuple[JobRecord, ReceivedMessage]:
    """Play a worker slot: the session's message is received and its job claimed."""
    svc = world.sessions.jobs
    [received] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    # The owner as a worker's slot makes it: the worker and a token of this claim.
    owner = claim_owner(worker, "c0ffee01")
    taken = svc.lifecycle.claim(received, POOL, owner=owner, lease_seconds=LEASE, worker=worker)
    assert taken.job is not None, taken.reason
    return taken.job, received


class ScriptedLoop(SessionLoop):
    """The worker's session loop (its claims, records and answers) with ``reply`` in place
    of a browser running the steps."""

    def __init__(self, world: World, job: JobRecord, reply: Callable[[Command], Answer]):
        assert job.request.session is not None
        ctx: Any = SimpleNamespace(
            result={},
            tenant_id=job.tenant_id,
            plan=SimpleNamespace(job_id=job.job_id),
            events=None,
            masker=Masker(),  # the session's record is masked on each write
        )

        async def no_evaluate() -> bool:
            return False

        super().__init__(
            ctx,
            world.worker.open(job.tenant_id, job.job_id),
            job.request.session,
            commands=world.commands,
            evaluate_allowed=no_evaluate,
            wall_clock=world.clock.now,
        )
        self._reply = reply

    async def _steps(self, command: Command) -> Answer:
        answer = self._reply(command)
        if answer.ok:
            self.recorded.extend(command.steps[: answer.ran])
        return answer


@pytest.fixture
def answering(world: World) -> Iterator[Callable[[JobRecord, Callable[[Command], Answer]], None]]:
    """A worker's session loop in a thread, answering commands with ``reply``."""
    threads: list[tuple[threading.Thread, JobRecord]] = []

    def start(job: JobRecord, reply: Callable[[Command], Answer]) -> None:
        loop = ScriptedLoop(world, job, reply)
        thread = threading.Thread(target=asyncio.run, args=(loop.run(),), daemon=True)
        thread.start()
        threads.append((thread, job))

    yield start
    for thread, job in threads:
        close = Wakeup(id="close", op="close", tenant_id=job.tenant_id, session_id=job.job_id)
        world.worker.route(close)  # the loop ends
        thread.join(timeout=15)


def test_a_session_opens_as_a_job_with_its_terms_and_makes_nothing_else(world: World) -> None:
    body = OpenSession(idle_timeout_s=60, max_duration_s=600, use_session="shop-login")
    job = service.open_session(world.sessions, TENANT, body)

    terms = job.request.session
    assert terms is not None and terms.idle_timeout_s == 60 and terms.max_duration_s == 600
    assert job.status is JobStatus.QUEUED
    assert job.request.max_attempts == 1  # a browser's state cannot be retried
    assert job.request.options.job_timeout_s == 600  # the watchdog is the max duration
    assert [s.action for s in job.request.steps] == ["use_session"]
    assert world.inbox.listed("") == world.worker.inbox.listed("")  # no queue made
    assert [i.name for i in world.inbox.listed("")] == [world.worker.name]
    view = service.view(world.sessions, job)
    assert (view.status, view.steps) == ("starting", [])


def test_opening_past_the_running_slots_is_a_429_naming_the_limit(world: World) -> None:
    quotas = world.sessions.quotas
    limit = quotas.limits(TENANT).max_running
    for index in range(limit):
        quotas.counters.take_slot(TENANT, f"job{index}", limit=limit)

    with pytest.raises(TooManyRequests) as refused:
        service.open_session(world.sessions, TENANT, OpenSession())
    assert refused.value.details["limit"] == "max_running"


def test_a_step_reaches_the_worker_and_its_answer_comes_back_with_a_link(
    world: World, answering: Callable[[JobRecord, Callable[[Command], Answer]], None]
) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    seen: list[Command] = []

    def reply(command: Command) -> Answer:
        seen.append(command)
        page = Observation(url="http://127.0.0.1/", title="Demo", aria_snapshot="- heading")
        key = f"{TENANT}/{job.job_id}/1/session-0001.png"
        return Answer(id=command.id, ran=1, observation=page, screenshot_key=key)

    answering(job, reply)
    answer = stepping.run_steps(
        world.sessions,
        TENANT,
        job.job_id,
        steps_request(
            {"action": "goto", "url": "http://127.0.0.1:8000/"}, observe={"screenshot": True}
        ),
    )

    assert isinstance(answer, StepsAnswer)
    assert answer.ok and answer.ran == 1 and answer.status == "ready"
    assert answer.observation is not None and answer.observation.title == "Demo"
    assert answer.observation.screenshot_url is not None
    assert seen[0].steps == [{"action": "goto", "url": "http://127.0.0.1:8000/"}]


def test_a_wake_up_whose_inbox_is_gone_is_said_not_silently_dropped(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """A session whose worker's inbox does not exist (the worker died; or the inbox named
    otherwise, as the API once did): its commands wait for the worker's own look at the
    ledger, and the API says so instead of nothing."""
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world, worker="gone")
    answer = stepping.run_steps(
        world.sessions, TENANT, job.job_id, steps_request(wait_s=0), command_id="c1"
    )
    assert isinstance(answer, CommandView) and answer.state == "pending"
    gone = [r for r in caplog.records if "is gone" in r.getMessage()]
    assert gone and inbox_name("dev", "gone") in gone[0].getMessage()


def test_a_step_using_an_input_the_session_lacks_is_a_422_naming_the_field(world: World) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    with pytest.raises(InvalidField) as refused:
        stepping.run_steps(
            world.sessions,
            TENANT,
            job.job_id,
            steps_request({"action": "fill", "selector": "#q", "value": "{{inputs.who}}"}),
        )
    assert refused.value.details["field"] == "body"
    assert "inputs has no 'who'" in refused.value.message


def test_another_tenants_session_is_not_found(world: World) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    with pytest.raises(NotFound):
        service.get_session(world.sessions, "other", job.job_id)
    with pytest.raises(NotFound):
        stepping.run_steps(world.sessions, "other", job.job_id, steps_request())


def test_a_silent_worker_is_a_202_with_the_command_never_a_504(world: World) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    sent = stepping.run_steps(
        world.sessions,
        TENANT,
        job.job_id,
        steps_request({"action": "click", "selector": "#go"}, wait_s=1, command_id="c-1"),
    )
    assert isinstance(sent, CommandView) and (sent.command_id, sent.state) == ("c-1", "pending")
    assert stepping.read_command(world.sessions, TENANT, job.job_id, "c-1").state == "pending"


def test_a_step_answered_after_the_call_gave_up_is_read_by_its_id_and_never_run_twice(
    world: World, answering: Callable[[JobRecord, Callable[[Command], Answer]], None]
) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    body = steps_request({"action": "click", "selector": "#go"}, wait_s=0, command_id="buy-1")
    sent = stepping.run_steps(world.sessions, TENANT, job.job_id, body)
    assert isinstance(sent, CommandView)  # wait_s=0: the call held nothing
    ran: list[Command] = []

    def reply(command: Command) -> Answer:
        ran.append(command)
        return Answer(id=command.id, ran=1, result={"clicked": len(ran)})

    answering(job, reply)
    first = stepping.run_steps(
        world.sessions, TENANT, job.job_id, body.model_copy(update={"wait_s": 10})
    )
    again = stepping.run_steps(
        world.sessions, TENANT, job.job_id, body.model_copy(update={"wait_s": 10})
    )
    read = stepping.read_command(world.sessions, TENANT, job.job_id, "buy-1")

    assert isinstance(first, StepsAnswer) and first.result == {"clicked": 1}
    assert again == first  # the retry is answered from the first run
    assert read.state == "done" and read.answer == first
    assert len(ran) == 1  # three deliveries (the first call, two retries): one run
    view = service.view(world.sessions, service.get_session(world.sessions, TENANT, job.job_id))
    assert view.steps == [{"action": "click", "selector": "#go"}]


def test_a_duplicate_delivery_of_a_command_runs_it_once(
    world: World, answering: Callable[[JobRecord, Callable[[Command], Answer]], None]
) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    world.inbox.copies = 2  # SQS: at-least-once delivery
    ran: list[Command] = []
    answering(job, lambda c: ran.append(c) or Answer(id=c.id, ran=1))
    for n in range(3):
        body = steps_request({"action": "click", "selector": f"#b{n}"}, wait_s=10)
        answer = stepping.run_steps(world.sessions, TENANT, job.job_id, body)
        assert isinstance(answer, StepsAnswer) and answer.ok
    service.close_session(world.sessions, TENANT, job.job_id)
    assert [c.steps[0]["selector"] for c in ran] == ["#b0", "#b1", "#b2"]


def test_a_command_past_its_deadline_is_answered_expired_and_never_runs(
    world: World, answering: Callable[[JobRecord, Callable[[Command], Answer]], None]
) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    body = steps_request({"action": "click", "selector": "#late"}, wait_s=0, deadline_s=5)
    sent = stepping.run_steps(
        world.sessions, TENANT, job.job_id, body.model_copy(update={"command_id": "late"})
    )
    assert isinstance(sent, CommandView)
    world.clock.advance(6)  # the worker was busy past the command's deadline
    ran: list[Command] = []
    answering(job, lambda c: ran.append(c) or Answer(id=c.id, ran=1))
    fresh = stepping.run_steps(
        world.sessions, TENANT, job.job_id, body.model_copy(update={"wait_s": 10})
    )
    read = stepping.read_command(world.sessions, TENANT, job.job_id, "late")

    assert read.state == "expired" and read.answer is not None
    assert read.answer.ok is False and read.answer.error is not None
    assert read.answer.error["kind"] == "expired" and read.answer.ran == 0
    assert isinstance(fresh, StepsAnswer) and fresh.ok  # a new command runs
    assert [c.command_id for c in ran] == [fresh.command_id]


def test_a_reused_command_id_with_other_steps_is_a_409(world: World) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    first = steps_request({"action": "click", "selector": "#a"}, wait_s=0, command_id="k")
    stepping.run_steps(world.sessions, TENANT, job.job_id, first)
    other = steps_request({"action": "click", "selector": "#b"}, wait_s=0, command_id="k")
    with pytest.raises(IdempotencyKeyReused) as refused:
        stepping.run_steps(world.sessions, TENANT, job.job_id, other)
    assert refused.value.details["field"] == "command_id"
    with pytest.raises(InvalidField) as differ:
        stepping.run_steps(world.sessions, TENANT, job.job_id, first, command_id="other")
    assert differ.value.details["field"] == "command_id"


def test_a_command_pending_when_its_session_ended_is_expired_and_one_running_lost(
    world: World,
) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    for cid in ("queued", "taken"):
        body = steps_request({"action": "click", "selector": "#x"}, wait_s=0, command_id=cid)
        stepping.run_steps(world.sessions, TENANT, job.job_id, body)
    claim = world.commands.claim(TENANT, job.job_id, "taken", now=world.clock.now(), order="1")
    assert claim.verdict == "run"
    world.clock.advance(LEASE + 1)  # the worker died

    assert stepping.read_command(world.sessions, TENANT, job.job_id, "queued").state == "expired"
    assert stepping.read_command(world.sessions, TENANT, job.job_id, "taken").state == "lost"
    with pytest.raises(NotFound):
        stepping.read_command(world.sessions, TENANT, job.job_id, "never-sent")


def test_a_killed_worker_makes_the_session_lost_for_every_caller(world: World) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    assert job.request.session is not None
    world.clock.advance(LEASE + 1)  # no heartbeat: the worker is gone

    found = service.get_session(world.sessions, TENANT, job.job_id)
    assert service.view(world.sessions, found).status == "lost"
    assert world.lost == [job.job_id]
    assert world.sessions.quotas.view(TENANT).running == frozenset()  # its slot given back
    with pytest.raises(SessionEnded) as ended:
        stepping.run_steps(
            world.sessions, TENANT, job.job_id, steps_request({"action": "click", "selector": "a"})
        )
    assert ended.value.details["status"] == "lost"


def test_closing_a_session_not_started_cancels_it(world: World) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    closed = service.close_session(world.sessions, TENANT, job.job_id)
    assert service.status_of(closed) == ("closed", "closed")
    assert world.inbox.sent == []  # no worker holds it: nobody to wake
    assert service.close_session(world.sessions, TENANT, job.job_id).status is closed.status


def test_a_session_its_worker_ends_while_it_is_closed_answers_closed_not_409(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker takes the close wake-up at once and ends the job before the API's own
    # cancel: the close is idempotent, so the caller gets the ended session. (Seen under
    # load in the e2e suite as a 409 "already ended as succeeded".)
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    lifecycle = world.sessions.jobs.lifecycle

    def worker_ends_it(name: str, wakeup: Wakeup) -> bool:
        lifecycle.finish(job, Outcome(JobStatus.SUCCEEDED), "w1")
        return True

    monkeypatch.setattr(world.inbox, "send", worker_ends_it)
    closed = service.close_session(world.sessions, TENANT, job.job_id)
    assert closed.status is JobStatus.SUCCEEDED
    assert service.view(world.sessions, closed).status == "closed"


def test_an_ended_session_saves_its_steps_as_the_next_workflow_version(
    world: World, answering: Callable[[JobRecord, Callable[[Command], Answer]], None]
) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    steps = [
        {"action": "goto", "url": "http://127.0.0.1:8000/form"},
        {"action": "fill", "selector": "#name", "value": "Ada Lovelace"},
        {"action": "click", "selector": "button[type=submit]"},
    ]
    answering(job, lambda c: Answer(id=c.id, ran=len(c.steps)))
    for one in steps:
        assert isinstance(
            stepping.run_steps(world.sessions, TENANT, job.job_id, steps_request(one)), StepsAnswer
        )
    # Its worker is killed: nothing of the steps was written in its outcome.
    world.clock.advance(LEASE + 1)

    body = SaveAsWorkflow(name="signup", inputs={"who": "Ada Lovelace"})
    first = service.save_as_workflow(world.sessions, TENANT, job.job_id, body)
    again = service.save_as_workflow(world.sessions, TENANT, job.job_id, body)

    assert (first.version, again.version, first.steps) == (1, 2, 3)
    workflows = world.sessions.jobs.workflows
    assert workflows is not None
    saved = resolve(workflows, TENANT, "signup@1").definition
    assert saved.inputs == {"who": "Ada Lovelace"}
    assert saved.steps[1].model_dump(exclude_none=True)["value"] == "{{inputs.who}}"
    view = service.view(world.sessions, service.get_session(world.sessions, TENANT, job.job_id))
    assert (view.status, view.steps) == ("lost", steps)


def test_a_long_session_keeps_every_step_past_the_outcome_bound(
    world: World, answering: Callable[[JobRecord, Callable[[Command], Answer]], None]
) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    answering(job, lambda c: Answer(id=c.id, ran=len(c.steps)))
    text = "x" * 2000
    sent = [{"action": "fill", "selector": f"#f{n}", "value": text} for n in range(40)]
    for batch in range(0, 40, 10):  # 80 KB of steps: more than a job record keeps
        body = StepsRequest.model_validate({"steps": sent[batch : batch + 10]})
        assert isinstance(stepping.run_steps(world.sessions, TENANT, job.job_id, body), StepsAnswer)
    service.close_session(world.sessions, TENANT, job.job_id)
    saved = service.save_as_workflow(
        world.sessions, TENANT, job.job_id, SaveAsWorkflow(name="long")
    )
    assert saved.steps == 40


def test_a_named_literal_that_occurs_nowhere_is_a_422_naming_the_input() -> None:
    steps = [{"action": "fill", "selector": "#q", "value": "pagefleet"}]
    with pytest.raises(InvalidField) as refused:
        parametrize(steps, {"query": "pagefleet", "page": "two"})
    assert refused.value.details["field"] == "inputs.page"
    assert parametrize(steps, {"query": "pagefleet"})[0]["value"] == "{{inputs.query}}"


def test_no_call_is_held_while_its_command_waits_for_a_browser(world: World) -> None:
    """Issue 32 finding 8: a step held its API execution for up to ``wait_s`` (10 s by
    default, 25 at most) whatever the worker was doing, so 1,000 agents held 1,000 Lambda
    executions. Now a call is held only while its command runs: a session still starting,
    or a worker busy (or gone) that does not take the command within CLAIM_GRACE_S, is a
    202 at once. Time here is virtual: what the call slept is what it held."""
    held = [0.0]

    def sleep(seconds: float) -> None:
        held[0] += seconds

    sessions = dataclasses.replace(
        world.sessions, max_wait_s=25.0, clock=lambda: held[0], sleep=sleep
    )
    body = steps_request({"action": "click", "selector": "#go"}, wait_s=25)
    job = service.open_session(sessions, TENANT, OpenSession())
    starting = stepping.run_steps(sessions, TENANT, job.job_id, body)
    assert isinstance(starting, CommandView) and starting.state == "pending"
    assert held[0] == 0  # starting: nothing to wait for

    claimed(world)  # its worker holds it, but runs another command and takes none
    busy = stepping.run_steps(
        sessions, TENANT, job.job_id, body.model_copy(update={"command_id": "b"})
    )
    assert isinstance(busy, CommandView) and busy.state == "pending"
    assert held[0] <= stepping.CLAIM_GRACE_S + stepping.LAST_READ_S


def test_an_open_is_told_of_once_its_job_is_recorded_and_its_failure_is_not_the_opens(
    world: World,
) -> None:
    """The open's audit record is written alongside the job's enqueue (one round trip less
    on the open's path): after the record exists, before the open answers; a failure of it
    is logged, and the session still opens."""
    seen: list[JobStatus] = []

    def opened(job: JobRecord) -> None:
        seen.append(world.sessions.jobs.store.get(TENANT, job.job_id).status)
        raise RuntimeError("the audit table is unavailable")

    job = service.open_session(world.sessions, TENANT, OpenSession(), opened=opened)
    assert seen == [JobStatus.QUEUED]
    assert world.sessions.jobs.store.get(TENANT, job.job_id).enqueued_at is not None


def test_the_first_step_of_a_session_opened_here_records_its_command_before_any_read(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round trip less on a session's open -> first step: the process that opened it
    knows its request, so the command is recorded at once; the job is read after the
    record, to find the worker that holds it (or the worker finds the command itself)."""
    job = service.open_session(world.sessions, TENANT, OpenSession())
    calls: list[str] = []
    store, ledger = world.sessions.jobs.store, world.commands
    read, record = store.get, ledger.record

    def read_job(*args: Any, **kwargs: Any) -> Any:
        calls.append("job")
        return read(*args, **kwargs)

    def record_command(command: Any) -> Any:
        calls.append("record")
        return record(command)

    monkeypatch.setattr(store, "get", read_job)
    monkeypatch.setattr(ledger, "record", record_command)
    body = steps_request({"action": "click", "selector": "#go"})
    first = stepping.run_steps(world.sessions, TENANT, job.job_id, body)
    assert isinstance(first, CommandView) and first.state == "pending"  # still starting
    assert calls[:2] == ["record", "job"]


class AnsweredAt(FakeCommandLedger):
    """A ledger on a virtual clock: each write takes ``trip`` seconds (the record's round
    trip), and the worker's answer is in the record from ``answer_at`` on."""

    def __init__(self, now: list[float], trip: float, answer_at: float) -> None:
        super().__init__()
        self.now, self.trip, self.answer_at = now, trip, answer_at
        self.reads: list[float] = []

    def record(self, command: Any) -> Any:
        self.now[0] += self.trip
        return super().record(command)

    def get(self, tenant_id: str, session_id: str, command_id: str) -> Any:
        self.reads.append(self.now[0])
        found = super().get(tenant_id, session_id, command_id)
        if found is not None and found.state.value != "done" and self.now[0] >= self.answer_at:
            if found.state.value == "pending":
                self.claim(tenant_id, session_id, command_id, now=0.0, order="o")
            self.finish(tenant_id, session_id, command_id, Answer(id="a", ran=1), [])
            found = super().get(tenant_id, session_id, command_id)
        return found


def test_a_call_reads_for_its_answer_only_once_the_worker_could_have_written_it(
    world: World,
) -> None:
    """The worker's claim is a write after the wake-up, about as long as the record's own,
    and the step and the answer's write follow: a read sooner finds nothing, and on the
    local stack it holds up the embedded AWS those writes wait for. The answer is still
    seen within FIRST_READ_S of being written (virtual time: the record takes 8 ms, the
    answer is in at 30 ms)."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    ledger = AnsweredAt(now, trip=0.008, answer_at=0.030)
    sessions = dataclasses.replace(world.sessions, commands=ledger, clock=lambda: now[0])
    sessions = dataclasses.replace(sessions, sleep=sleep)
    job = service.open_session(sessions, TENANT, OpenSession())
    claimed(world)  # its worker holds it: woken alongside the record, then read for
    body = steps_request({"action": "click", "selector": "#go"})
    answer = stepping.run_steps(sessions, TENANT, job.job_id, body)
    assert isinstance(answer, StepsAnswer) and answer.ok
    waited = [at for at in ledger.reads if at <= ledger.answer_at + stepping.FIRST_READ_S]
    assert waited[0] >= 0.008 + stepping.ANSWER_TRIPS * 0.008  # none before the claim's trip
    assert len(waited) <= 4  # 5 on a read every 5 ms from the record on
    assert ledger.reads[-1] <= ledger.answer_at + stepping.FIRST_READ_S


class AnsweredAfter(AnsweredAt):
    """``AnsweredAt``, each command answered ``after`` seconds past its record (by kind of
    command: its first step's action)."""

    def __init__(self, now: list[float], trip: float, after: dict[str, float]) -> None:
        super().__init__(now, trip, answer_at=0.0)
        self.after, self.recorded_at, self.kinds = after, {}, {}

    def record(self, command: Any) -> Any:
        self.recorded_at[command.command_id] = self.now[0]
        self.kinds[command.command_id] = command.body.steps[0]["action"]
        return super().record(command)

    def get(self, tenant_id: str, session_id: str, command_id: str) -> Any:
        kind = self.kinds.get(command_id, "")
        self.answer_at = self.recorded_at.get(command_id, 0.0) + self.after.get(kind, 0.0)
        return super().get(tenant_id, session_id, command_id)


def test_later_steps_of_a_kind_are_read_for_when_their_answers_came_lately(
    world: World,
) -> None:
    """The steps of one kind in a session take about as long as their last ones: after the
    first few, a call reads once or twice, just before its answer came lately, where the
    usual schedule read four times; it sees the answer as soon. A step of another kind is
    read on the usual schedule, and one slower this time is still read until its answer."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    ledger = AnsweredAfter(now, trip=0.004, after={"click": 0.031, "hover": 0.031})
    sessions = dataclasses.replace(world.sessions, commands=ledger, clock=lambda: now[0])
    sessions = dataclasses.replace(sessions, sleep=sleep)
    job = service.open_session(sessions, TENANT, OpenSession())
    claimed(world)

    def step(action: str) -> tuple[int, float]:
        """Its reads, and how long after its answer the call had it."""
        ledger.reads.clear()
        body = steps_request({"action": action, "selector": "#go"})
        answer = stepping.run_steps(sessions, TENANT, job.job_id, body)
        assert isinstance(answer, StepsAnswer) and answer.ok
        return len(ledger.reads), now[0] - ledger.answer_at

    usual, usual_late = step("click")  # nothing learned yet: the usual schedule
    later = [step("click") for _ in range(12)]
    # While it learns, a first read may come too soon (then two close ones find it).
    assert usual >= 4 and all(reads <= 2 for reads, _ in later[2:]), (usual, later)
    assert sum(reads for reads, _ in later) <= 2 * len(later)
    assert all(late <= min(usual_late, answer_times.SHORT_PAUSE_S) for _, late in later)
    other, _ = step("hover")  # another kind: nothing learned of it
    assert other >= 4
    ledger.after["click"] = 0.300  # slower this time: read until it comes
    _, late = step("click")
    assert late <= 0.300 * stepping.READ_SHARE  # the usual schedule after the close reads


def test_a_kind_whose_first_answers_were_slow_is_read_on_time_within_a_few_steps(
    world: World,
) -> None:
    """A session's first steps of a kind are often slower (the page's first use of them);
    the next ones come sooner, and a first read that finds the answer says only that it came
    before it. Each first read that finds it again moves the guess twice as far as the last,
    so the calls see their answers on time within a few steps, not one margin a step (the
    bench's step walked from 111 ms to 38 over forty steps, its answers in at ~40: 30 ms
    late at p50)."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    ledger = AnsweredAfter(now, trip=0.004, after={"fill": 0.110})
    sessions = dataclasses.replace(world.sessions, commands=ledger, clock=lambda: now[0])
    sessions = dataclasses.replace(sessions, sleep=sleep)
    job = service.open_session(sessions, TENANT, OpenSession())
    claimed(world)

    def step() -> tuple[int, float]:
        ledger.reads.clear()
        body = steps_request({"action": "fill", "selector": "#name", "value": "x"})
        answer = stepping.run_steps(sessions, TENANT, job.job_id, body)
        assert isinstance(answer, StepsAnswer) and answer.ok
        return len(ledger.reads), now[0] - ledger.answer_at

    for _ in range(3):  # slow at first: what the kind's first read is learned from
        step()
    ledger.after["fill"] = 0.040
    late = [step()[1] for _ in range(20)]
    # Down in a dozen steps (0.33 s late in all; a margin a step: 1.0 s, and 30 ms late
    # still at the twentieth), then on time.
    assert sum(late) < 0.4, late
    assert all(t <= answer_times.SHORT_PAUSE_S + 1e-9 for t in late[12:]), late


def test_a_read_with_wait_s_holds_while_its_command_runs_and_never_while_it_waits(
    world: World,
) -> None:
    """A session's first step comes while it starts: 202 at once, then the client reads
    the command. A read with ``wait_s`` of a running command is answered as soon as the
    answer is written (it was read every 50 ms plus a call's time: ~45 ms late on average
    on the start's path); of a pending one (its worker starting or busy) at once. Time is
    virtual: what the read slept is what it held."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    ledger = AnsweredAt(now, trip=0.0, answer_at=float("inf"))
    sessions = dataclasses.replace(world.sessions, commands=ledger, clock=lambda: now[0])
    sessions = dataclasses.replace(sessions, sleep=sleep)
    job = service.open_session(sessions, TENANT, OpenSession())
    body = steps_request({"action": "goto", "url": "https://example.com/"}, command_id="g")
    sent = stepping.run_steps(sessions, TENANT, job.job_id, body)
    assert isinstance(sent, CommandView) and sent.state == "pending"  # still starting

    pending = stepping.read_command(sessions, TENANT, job.job_id, "g", wait_s=10)
    assert pending.state == "pending" and now[0] == 0.0  # held nothing

    claimed(world)
    ledger.claim(TENANT, job.job_id, "g", now=0.0, order="o")  # the worker runs it
    ledger.answer_at = 0.150  # a 150 ms goto
    done = stepping.read_command(sessions, TENANT, job.job_id, "g", wait_s=10)
    assert done.state == "done" and done.answer is not None and done.answer.ok
    assert 0.150 <= now[0] <= 0.150 + stepping.LAST_READ_S  # held while it ran, no longer


def test_a_wakeup_for_a_session_the_worker_does_not_hold_or_of_another_tenant_is_dropped(
    world: World,
) -> None:
    mailbox = world.worker.open(TENANT, "s1")
    for wakeup in (
        Wakeup(id="1", tenant_id=TENANT, session_id="s2", command_id="c"),  # not held here
        Wakeup(id="2", tenant_id="other", session_id="s1", command_id="c"),  # forged tenant
    ):
        world.worker.route(wakeup)
    assert asyncio.run(mailbox.get(0)) is None and world.worker.dropped == 2
    world.worker.route(Wakeup(id="3", tenant_id=TENANT, session_id="s1", command_id="c"))
    assert asyncio.run(mailbox.get(0)) is not None


def test_a_command_sent_while_the_session_starts_runs_when_its_worker_takes_it(
    world: World,
) -> None:
    """The worker looks at the ledger when it takes the session: what was sent before (no
    inbox to wake yet) runs first, once."""
    job = service.open_session(world.sessions, TENANT, OpenSession())
    body = steps_request({"action": "click", "selector": "#early"}, command_id="early")
    assert isinstance(stepping.run_steps(world.sessions, TENANT, job.job_id, body), CommandView)
    job, _ = claimed(world)
    ran: list[str] = []
    loop = ScriptedLoop(world, job, lambda c: ran.append(c.command_id) or Answer(id=c.id, ran=1))
    world.worker.route(Wakeup(id="x", op="close", tenant_id=TENANT, session_id=job.job_id))
    asyncio.run(loop.run())
    assert ran == ["early"]
    read = stepping.read_command(world.sessions, TENANT, job.job_id, "early")
    assert read.state == "done"


def test_a_killed_workers_inbox_is_swept_and_a_live_ones_kept(world: World) -> None:
    from pagefleet.browsing.leftovers import INBOX_GRACE_S, sweep_inboxes
    from pagefleet.specs.resources import inbox_queue_prefix

    registry = FakeInboxRegistry()
    dead = WorkerInbox(world.inbox, registry, inbox_name("dev", "killed"), clock=lambda: 0.0)
    dead.start()  # registered until ALIVE_FOR_S, then never renewed: it was killed
    later = time.time() + 10_000
    registry.renew(world.worker.name, until=later + 60)
    swept = sweep_inboxes(world.inbox, registry, inbox_queue_prefix("dev"), now=later)
    assert swept.removed == 1 and not world.inbox.exists(dead.name)
    assert swept.removed_names == (dead.name,)  # named in the pass's log
    assert world.inbox.exists(world.worker.name)
    young = sweep_inboxes(
        world.inbox, FakeInboxRegistry(), inbox_queue_prefix("dev"), now=time.time()
    )
    assert young.removed == 0 and INBOX_GRACE_S > 0  # too young to judge, even unregistered


def test_open_sessions_are_listed_with_their_cost_so_far_and_last_activity(world: World) -> None:
    from pagefleet.browsing import spend

    def listed(tenant: str, status: spend.Listed) -> list[str]:
        found = spend.open_sessions(
            world.sessions.jobs, world.sessions.quotas, world.commands, Worker(), tenant, status
        )
        return [v.session_id for v in found]

    ready = service.open_session(world.sessions, TENANT, OpenSession(name="agent"))
    claimed(world)
    starting = service.open_session(world.sessions, TENANT, OpenSession())
    body = steps_request({"action": "click", "selector": "#go"}, wait_s=0, command_id="c")
    stepping.run_steps(world.sessions, TENANT, ready.job_id, body)
    world.clock.advance(600)  # ten minutes of browser

    found = spend.open_sessions(
        world.sessions.jobs, world.sessions.quotas, world.commands, Worker(), TENANT, "ready"
    )
    [view] = found
    assert (view.session_id, view.status, view.name) == (ready.job_id, "ready", "agent")
    assert view.cost_usd == round(spend.cost_usd(600, Worker()), 6) > spend.cost_usd(0, Worker())
    assert view.last_activity_at is not None and view.last_activity_at >= (view.started_at or "")
    assert listed(TENANT, "starting") == [starting.job_id]
    assert listed(TENANT, "open") == [starting.job_id, ready.job_id]  # newest first
    assert listed("other", "open") == []  # the tenant's own only
    service.close_session(world.sessions, TENANT, starting.job_id)
    assert listed(TENANT, "starting") == []


def test_a_spend_cap_that_cannot_cover_a_start_is_a_422_and_one_that_can_is_kept(
    world: World,
) -> None:
    from pagefleet.browsing import spend

    floor = spend.cost_usd(0, world.sessions.pricing)
    with pytest.raises(InvalidField) as refused:
        service.open_session(world.sessions, TENANT, OpenSession(max_cost_usd=floor / 2))
    assert refused.value.details["field"] == "max_cost_usd"
    for bad in (0, -1, 101):
        with pytest.raises(ValidationError):
            OpenSession.model_validate({"max_cost_usd": bad})
    job = service.open_session(world.sessions, TENANT, OpenSession(max_cost_usd=0.05))
    terms = job.request.session
    assert terms is not None and terms.max_cost_usd == 0.05 and terms.cost_cap_s is not None
    spent = spend.cost_usd(terms.cost_cap_s, world.sessions.pricing)
    assert abs(spent - 0.05) < 1e-6  # the seconds it buys cost the cap (to rounding)


def test_a_session_ended_by_its_cap_reads_closed_for_cost_cap() -> None:
    record = SimpleNamespace(
        status=JobStatus.FAILED,
        error=SimpleNamespace(kind="cost_cap_reached"),
        result=None,
    )
    assert service.status_of(record) == ("closed", "cost_cap")  # type: ignore[arg-type]


@pytest.mark.parametrize(("wait_s", "read_waits"), [(None, "10"), (7, "7"), (0, None)])
def test_the_client_reads_a_202_command_waiting_as_its_call_did(
    wait_s: int | None, read_waits: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``session_steps`` after a 202: each read of the command waits for a running one's
    answer as the call did (``wait_s``, the API's default 10 when not given), and holds
    nothing with ``wait_s=0`` (how the console and ``pagefleet mcp`` step)."""
    import httpx

    from pagefleet.client import PagefleetClient
    from pagefleet.client import browsing as calls

    monkeypatch.setattr(calls.time, "sleep", lambda seconds: None)
    reads: list[str | None] = []
    pending = {"session_id": "s", "command_id": "c", "state": "pending"}
    answer = {"session_id": "s", "command_id": "c", "status": "ready", "ok": True, "ran": 1}

    def api(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json=pending)
        reads.append(request.url.params.get("wait_s"))
        if len(reads) < 2:
            return httpx.Response(200, json=pending)
        return httpx.Response(200, json={**pending, "state": "done", "answer": answer})

    client = PagefleetClient("http://127.0.0.1:9", "k", transport=httpx.MockTransport(api))
    got = client.session_steps("s", {"action": "click", "selector": "#go"}, wait_s=wait_s)
    assert got.ok and reads == [read_waits, read_waits]
