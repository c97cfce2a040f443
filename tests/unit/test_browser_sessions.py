"""Browser sessions on the fakes: a session is a job (admission, slots, lease, lifecycle),
its steps go over its channel, a dead worker makes it `lost`, never a hang."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator

import pytest

from pagefleet.browsing import service
from pagefleet.browsing.channel import answer_fate
from pagefleet.browsing.models import (
    Answer,
    Command,
    Observation,
    Observe,
    OpenSession,
    SaveAsWorkflow,
)
from pagefleet.browsing.recording import parametrize
from pagefleet.errors import InvalidField, NotFound, SessionBusy, SessionEnded, TooManyRequests
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.models import JobRecord
from pagefleet.jobs.ports import ReceivedMessage
from pagefleet.jobs.states import JobStatus
from pagefleet.workflow import STEP_ADAPTER, Step
from pagefleet.workflow.versions import resolve
from tests.fakes import FakeClock
from tests.fakes.session_channel import FakeSessionChannel
from tests.fakes.tenancy import fake_tenancy
from tests.fakes.workflows import FakeWorkflowStore

TENANT = "acme"
POOL = "standard"
LEASE = 60


@dataclasses.dataclass
class World:
    sessions: service.Sessions
    channel: FakeSessionChannel
    clock: FakeClock
    lost: list[str]


@pytest.fixture
def world() -> World:
    clock = FakeClock()
    svc, tenancy = fake_tenancy(clock)
    svc = dataclasses.replace(svc, workflows=FakeWorkflowStore())
    channel = FakeSessionChannel()
    lost: list[str] = []
    sessions = service.Sessions(
        svc,
        tenancy.quotas,
        channel,
        wait_margin_s=0.0,
        max_wait_s=2.0,
        on_lost=lambda job: lost.append(job.job_id),
    )
    return World(sessions, channel, clock, lost)


def step(raw: dict[str, object]) -> Step:
    return STEP_ADAPTER.validate_python(raw)


def claimed(world: World) -> tuple[JobRecord, ReceivedMessage]:
    """Play a worker slot: the session's message is received and its job claimed."""
    svc = world.sessions.jobs
    [received] = svc.queue.receive(POOL, max_messages=1, wait_seconds=0, visibility=LEASE)
    taken = svc.lifecycle.claim(received, POOL, owner="w1", lease_seconds=LEASE, worker="w1")
    assert taken.job is not None, taken.reason
    return taken.job, received


@pytest.fixture
def answering(world: World) -> Iterator[Callable[[JobRecord, Callable[[Command], Answer]], None]]:
    """A worker's session loop in a thread, answering commands with ``reply``."""
    threads: list[threading.Thread] = []
    stop = threading.Event()

    def start(job: JobRecord, reply: Callable[[Command], Answer]) -> None:
        assert job.request.session is not None
        channel = job.request.session.channel

        def loop() -> None:
            while not stop.is_set():
                if not world.channel.exists(channel):
                    return
                command = world.channel.next_command(channel, wait_s=1)
                if command is not None:
                    world.channel.send_answer(channel, reply(command))

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    stop.set()
    for thread in threads:
        thread.join(timeout=5)


def test_a_session_opens_as_a_job_with_its_terms_and_its_channel(world: World) -> None:
    body = OpenSession(idle_timeout_s=60, max_duration_s=600, use_session="shop-login")
    job = service.open_session(world.sessions, TENANT, body)

    terms = job.request.session
    assert terms is not None and terms.idle_timeout_s == 60 and terms.max_duration_s == 600
    assert job.status is JobStatus.QUEUED
    assert job.request.max_attempts == 1  # a browser's state cannot be retried
    assert job.request.options.job_timeout_s == 600  # the watchdog is the max duration
    assert [s.action for s in job.request.steps] == ["use_session"]
    assert world.channel.exists(terms.channel)
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
    answer = service.run_steps(
        world.sessions,
        TENANT,
        job.job_id,
        [step({"action": "goto", "url": "http://127.0.0.1:8000/"})],
        Observe(screenshot=True),
    )

    assert answer.ok and answer.ran == 1 and answer.status == "ready"
    assert answer.observation is not None and answer.observation.title == "Demo"
    assert answer.observation.screenshot_url is not None
    assert seen[0].steps == [{"action": "goto", "url": "http://127.0.0.1:8000/"}]


def test_a_step_using_an_input_the_session_lacks_is_a_422_naming_the_field(world: World) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    with pytest.raises(InvalidField) as refused:
        service.run_steps(
            world.sessions,
            TENANT,
            job.job_id,
            [step({"action": "fill", "selector": "#q", "value": "{{inputs.who}}"})],
            Observe(),
        )
    assert refused.value.details["field"] == "body"
    assert "inputs has no 'who'" in refused.value.message


def test_another_tenants_session_is_not_found(world: World) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    with pytest.raises(NotFound):
        service.get_session(world.sessions, "other", job.job_id)
    with pytest.raises(NotFound):
        service.run_steps(world.sessions, "other", job.job_id, [], Observe())


def test_a_silent_worker_with_a_live_lease_is_a_504_not_a_hang(world: World) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    with pytest.raises(SessionBusy):
        service.run_steps(
            world.sessions,
            TENANT,
            job.job_id,
            [step({"action": "click", "selector": "#go", "timeout_ms": 100})],
            Observe(),
        )


def test_a_killed_worker_makes_the_session_lost_for_every_caller(world: World) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    assert job.request.session is not None
    world.clock.advance(LEASE + 1)  # no heartbeat: the worker is gone

    found = service.get_session(world.sessions, TENANT, job.job_id)
    assert service.view(world.sessions, found).status == "lost"
    assert world.lost == [job.job_id]
    assert not world.channel.exists(job.request.session.channel)  # its queues deleted
    assert world.sessions.quotas.view(TENANT).running == frozenset()  # its slot given back
    with pytest.raises(SessionEnded) as ended:
        service.run_steps(
            world.sessions,
            TENANT,
            job.job_id,
            [step({"action": "click", "selector": "a"})],
            Observe(),
        )
    assert ended.value.details["status"] == "lost"


def test_closing_a_session_not_started_cancels_it_and_deletes_its_queues(world: World) -> None:
    job = service.open_session(world.sessions, TENANT, OpenSession())
    closed = service.close_session(world.sessions, TENANT, job.job_id)
    assert service.status_of(closed) == ("closed", "closed")
    assert job.request.session is not None
    assert not world.channel.exists(job.request.session.channel)
    assert service.close_session(world.sessions, TENANT, job.job_id).status is closed.status


def test_an_ended_session_saves_its_steps_as_the_next_workflow_version(world: World) -> None:
    service.open_session(world.sessions, TENANT, OpenSession())
    job, _ = claimed(world)
    steps = [
        {"action": "goto", "url": "http://127.0.0.1:8000/form"},
        {"action": "fill", "selector": "#name", "value": "Ada Lovelace"},
        {"action": "click", "selector": "button[type=submit]"},
    ]
    result = {"steps": steps, "data": {}, "closed_reason": "idle"}
    world.sessions.jobs.lifecycle.finish(job, Outcome(JobStatus.SUCCEEDED, result=result), "w1")

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
    assert (view.status, view.closed_reason, view.steps) == ("closed", "idle", steps)


def test_a_named_literal_that_occurs_nowhere_is_a_422_naming_the_input() -> None:
    steps = [{"action": "fill", "selector": "#q", "value": "pagefleet"}]
    with pytest.raises(InvalidField) as refused:
        parametrize(steps, {"query": "pagefleet", "page": "two"})
    assert refused.value.details["field"] == "inputs.page"
    assert parametrize(steps, {"query": "pagefleet"})[0]["value"] == "{{inputs.query}}"


def test_an_answer_goes_to_its_caller_and_a_stale_one_is_dropped() -> None:
    assert answer_fate("01b", "01b") == "take"
    assert answer_fate("01a", "01b") == "drop"  # its caller stopped waiting
    assert answer_fate("01c", "01b") == "release"  # a newer caller's: handed back
