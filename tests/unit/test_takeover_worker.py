"""The worker's side of a takeover, on the fakes with a stand-in page: no step starts while a
person holds the page; their batches reach the page in order, scaled from the frame to the
viewport, even when the hand-back's wake-up comes before the input's; a batch still being
recorded is waited for; the idle return is written once (its run event and audit record),
and not at all when a hand-back won; the input events become the right CDP calls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from browser_task.observe.telemetry import JobLog
from browser_task.run.takeover import PageTakeover
from browser_task.run.takeover_input import cdp_events
from devstack.fakes import FakeClock, fake_services
from devstack.fakes.takeover_inputs import FakeTakeoverInputs
from devstack.fakes.tenancy import FakeAuditLog
from pagefleet.browsing.inbox import Wakeup
from pagefleet.browsing.input_events import InputBatch, InputRecord
from pagefleet.jobs.models import JobRequest, iso, new_ulid, utcnow
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.takeover import Takeover

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


class Cdp:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, method: str, params: dict[str, Any]) -> None:
        self.sent.append((method, params))

    async def detach(self) -> None:
        return None


class Page:
    viewport_size = {"width": 1280, "height": 800}

    def __init__(self) -> None:
        self.cdp = Cdp()
        self.context = self

    async def new_cdp_session(self, page: Any) -> Cdp:
        return self.cdp

    def is_closed(self) -> bool:
        return False


class Events:
    pricing = None  # a step's cost is not priced here

    def __init__(self) -> None:
        self.emitted: list[dict[str, Any]] = []
        self.renumbered = 0

    def emit(self, event_type: Any, /, **fields: Any) -> None:
        self.emitted.append({"type": event_type.value, **fields})

    def renumber(self) -> None:
        self.renumbered += 1

    def clock(self) -> float:
        return 1_800_000_000.0


def _running(svc: JobServices, clock: FakeClock) -> JobRecord:
    job = submit_job(svc, "t", REQUEST).job
    now = int(clock.now())
    return svc.store.claim(
        "t", job.job_id, owner="w1", lease_until=now + 60, now=now, started_at=iso(utcnow())
    )


def _take(svc: JobServices, job: JobRecord, clock: FakeClock, *, idle_s: int = 60) -> Takeover:
    lock = Takeover(
        takeover_id=new_ulid(),
        holder="t:k1",
        since=iso(utcnow()),
        until=int(clock.now()) + idle_s,
        idle_s=idle_s,
    )
    svc.store.take_over("t", job.job_id, lock, now=int(clock.now()))
    return lock


def _batch(job: JobRecord, lock: Takeover, seq: int, events: list[dict[str, Any]]) -> InputRecord:
    sent = InputBatch.model_validate(
        {"takeover_id": lock.takeover_id, "frame": {"width": 640, "height": 400}, "events": events}
    )
    return InputRecord(
        tenant_id="t",
        job_id=job.job_id,
        takeover_id=lock.takeover_id,
        seq=seq,
        frame=sent.frame,
        events=sent.events,
        expires_at=2_000_000_000,
    )


class Parts:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.svc = fake_services(self.clock)
        self.job = _running(self.svc, self.clock)
        self.inputs = FakeTakeoverInputs()
        self.page = Page()
        self.events = Events()
        self.audit = FakeAuditLog()

    def numbered(self, lock: Takeover) -> None:
        """An input batch numbered by the API (its record is put by the test)."""
        self.svc.store.touch_takeover(
            "t",
            self.job.job_id,
            lock.takeover_id,
            holder=lock.holder,
            until=lock.until,
            now=int(self.clock.now()),
            count_input=True,
        )

    def takeover(self) -> PageTakeover:
        return PageTakeover(
            self.page,  # type: ignore[arg-type]
            self.job,
            self.svc.store,
            lambda: self.inputs,
            events=self.events,  # type: ignore[arg-type]
            audit=self.audit,
            log=JobLog(),
            clock=self.clock.now,
        )


def test_steps_wait_while_held_and_input_lands_in_order_scaled_before_they_go_on() -> None:
    async def scenario() -> None:
        parts = Parts()
        worker = parts.takeover()
        lock = _take(parts.svc, parts.job, parts.clock)
        await worker.look()
        assert not worker.free
        waiting = asyncio.create_task(worker.wait_free())
        await asyncio.sleep(0)
        assert not waiting.done()
        # Batch 2 is recorded before batch 1: it waits for 1 (still being recorded).
        parts.numbered(lock)
        parts.numbered(lock)
        parts.inputs.put(_batch(parts.job, lock, 2, [{"type": "text", "text": "second"}]))
        await worker.look()
        assert worker.dispatched == 0
        parts.inputs.put(_batch(parts.job, lock, 1, [{"type": "click", "x": 120, "y": 70}]))
        await worker.look()
        assert worker.dispatched == 2
        methods = [(m, p.get("type"), p.get("x"), p.get("y")) for m, p in parts.page.cdp.sent]
        assert methods[0] == ("Input.dispatchMouseEvent", "mouseMoved", 240.0, 140.0)  # x2
        assert methods[-1][0] == "Input.insertText"
        # A batch recorded just before the hand-back, its wake-up after the hand-back's.
        parts.numbered(lock)
        parts.inputs.put(_batch(parts.job, lock, 3, [{"type": "key", "key": "Enter"}]))
        parts.svc.store.release_takeover("t", parts.job.job_id, lock.takeover_id)
        worker.told(
            Wakeup(
                id="w",
                op="takeover",
                tenant_id="t",
                session_id=parts.job.job_id,
                takeover_id=lock.takeover_id,
            )
        )
        await asyncio.wait_for(waiting, 5)
        assert worker.dispatched == 3  # the last batch landed before the steps went on
        assert parts.page.cdp.sent[-1][1]["type"] == "keyUp"
        assert parts.events.emitted == [] and parts.audit.records == []  # the API told those
        # The API numbered its events (taken, handed back): the worker's next come after them.
        assert parts.events.renumbered == 2
        await worker.close()

    asyncio.run(scenario())


def test_the_idle_return_is_written_once_and_not_when_a_hand_back_won() -> None:
    async def scenario() -> None:
        parts = Parts()
        first, second = parts.takeover(), parts.takeover()  # two readers racing
        lock = _take(parts.svc, parts.job, parts.clock, idle_s=30)
        await first.look()
        assert not first.free
        parts.clock.advance(31)
        stale = parts.svc.store.run_signals("t", parts.job.job_id, now=int(parts.clock.now()))
        await first.seen(stale.takeover)
        await second.seen(stale.takeover)  # read before the removal: it loses the write
        assert first.free and second.free
        assert parts.svc.store.get("t", parts.job.job_id).takeover is None
        assert parts.events.emitted == [
            {
                "type": "takeover",
                "state": "returned",
                "holder": "t:k1",
                "message": "no input for 30 s: the page went back to the job",
            }
        ]
        [record] = parts.audit.records
        assert (record.action, record.actor, record.target) == (
            "job.takeover_returned",
            "t:k1",
            parts.job.job_id,
        )
        assert record.details == {"takeover_id": lock.takeover_id, "idle_s": 30}

        # Handed back while its time ran out: the reader that saw it expired writes nothing.
        again = _take(parts.svc, parts.job, parts.clock, idle_s=30)
        parts.clock.advance(31)
        late = parts.svc.store.run_signals("t", parts.job.job_id, now=int(parts.clock.now()))
        parts.svc.store.release_takeover("t", parts.job.job_id, again.takeover_id)
        await first.seen(late.takeover)
        assert len(parts.events.emitted) == 1 and len(parts.audit.records) == 1

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("event", "calls"),
    [
        (
            {"type": "click", "x": 10, "y": 20, "count": 2, "modifiers": ["Shift"]},
            [
                ("mouseMoved", {"x": 20.0, "y": 40.0, "modifiers": 8}),
                ("mousePressed", {"clickCount": 1, "button": "left", "buttons": 1}),
                ("mouseReleased", {"clickCount": 1, "buttons": 0}),
                ("mousePressed", {"clickCount": 2}),
                ("mouseReleased", {"clickCount": 2}),
            ],
        ),
        (
            {"type": "move", "x": 10, "y": 20},
            [("mouseMoved", {"x": 20.0, "y": 40.0, "button": "none", "buttons": 0})],
        ),
        (  # a drag: the pointer moves with the left button held
            {"type": "move", "x": 10, "y": 20, "buttons": ["left"]},
            [("mouseMoved", {"button": "left", "buttons": 1})],
        ),
        (  # the second press of a person's double click
            {"type": "down", "x": 10, "y": 20, "count": 2},
            [("mousePressed", {"x": 20.0, "button": "left", "buttons": 1, "clickCount": 2})],
        ),
        (
            {"type": "up", "x": 10, "y": 20, "button": "right"},
            [("mouseReleased", {"button": "right", "buttons": 0, "clickCount": 1})],
        ),
        (
            {"type": "scroll", "x": 5, "y": 5, "dy": 300},
            [("mouseWheel", {"x": 10.0, "y": 10.0, "deltaX": 0, "deltaY": 300})],
        ),
        (
            {"type": "key", "key": "Enter"},
            [
                ("keyDown", {"key": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}),
                ("keyUp", {"key": "Enter"}),
            ],
        ),
        (
            {"type": "key", "key": "a", "modifiers": ["Control"]},
            [("rawKeyDown", {"key": "a", "code": "KeyA", "modifiers": 2}), ("keyUp", {})],
        ),
        ({"type": "key", "key": "x"}, [("keyDown", {"text": "x", "code": "KeyX"}), ("keyUp", {})]),
        ({"type": "text", "text": "é 42"}, [(None, {"text": "é 42"})]),
    ],
)
def test_input_events_become_the_cdp_calls_that_play_them(
    event: dict[str, Any], calls: list[tuple[str | None, dict[str, Any]]]
) -> None:
    batch = InputBatch.model_validate(
        {"takeover_id": new_ulid(), "frame": {"width": 640, "height": 400}, "events": [event]}
    )
    played = cdp_events(batch.events[0], 2.0, 2.0)
    assert len(played) == len(calls)
    for params, (kind, expected) in zip(played, calls, strict=True):
        assert params.get("type") == kind
        assert expected.items() <= params.items(), params


def _context(parts: Parts, step: Any, **extra: Any) -> Any:
    """A run of one step on the fake page, as the runner builds it (its takeover set)."""
    from types import SimpleNamespace

    from browser_task.run.context import RunContext
    from browser_task.run.plan import RunPlan
    from pagefleet.workflow.masking import Masker

    request = JobRequest(steps=[step])
    plan = RunPlan(
        tenant_id="t",
        job_id=parts.job.job_id,
        attempt=parts.job.attempt,
        tries=1,
        request=request,
        options=request.options,
        steps=(step,),
        compensate=(),
        labels=(step.action,),
        masker=Masker(),
    )
    ctx = RunContext(
        plan=plan,
        session=SimpleNamespace(page=parts.page),  # type: ignore[arg-type]
        guard=SimpleNamespace(stopped=None),  # type: ignore[arg-type]
        artifacts=None,  # type: ignore[arg-type]
        **extra,
    )
    ctx.takeover = parts.takeover()
    return ctx


def test_a_workflows_next_step_waits_while_held_and_the_wait_is_not_the_runs_own() -> None:
    """A job (not a session): the executor asks before each top-level step; the step starts
    once the page is handed back, and the time waited is set apart from job_timeout_s."""

    from browser_task.run.executor import run_steps
    from pagefleet.workflow import STEP_ADAPTER

    async def scenario() -> None:
        parts = Parts()
        step = STEP_ADAPTER.validate_python({"action": "sleep", "ms": 0})
        ctx = _context(parts, step, events=parts.events)
        lock = _take(parts.svc, parts.job, parts.clock)
        await ctx.takeover.look()
        running = asyncio.create_task(run_steps([step], ctx))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not running.done() and ctx.step_index is None  # the step has not started
        assert ctx.human_wait_started is not None  # the watchdog does not count the wait
        # Followers are told why the step has not begun.
        assert parts.events.emitted == [
            {"type": "log", "level": "info", "message": "step 0 waits: t:k1 holds the page"}
        ]
        parts.svc.store.release_takeover("t", parts.job.job_id, lock.takeover_id)
        ctx.takeover.told(
            Wakeup(
                id="w",
                op="takeover",
                tenant_id="t",
                session_id=parts.job.job_id,
                takeover_id=lock.takeover_id,
            )
        )
        await asyncio.wait_for(running, 5)
        assert ctx.step_index == 0 and ctx.human_wait_started is None
        assert ctx.human_waited_s > 0
        await ctx.takeover.close()

    asyncio.run(scenario())


def test_a_job_continued_while_held_reads_the_lock_before_its_next_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A person takes the waiting job's page and continues it at once, before the worker's
    next read of the lock: the resumed job reads it then, so its next step waits."""

    from browser_task.run.checkpointing import Progress
    from browser_task.run.steps import human
    from pagefleet.jobs.service import continue_job
    from pagefleet.jobs.states import JobStatus
    from pagefleet.workflow import STEP_ADAPTER

    monkeypatch.setattr(human, "POLL_S", 0.01)

    async def scenario() -> None:
        parts = Parts()
        ask = STEP_ADAPTER.validate_python({"action": "await_human", "prompt": "a code"})
        # Its takeover told nothing: no wake-up, no second's read yet.
        ctx = _context(parts, ask, progress=Progress(parts.svc.lifecycle, parts.job))
        waiting = asyncio.create_task(human.await_human(ask, ctx))  # type: ignore[arg-type]
        while parts.svc.store.get("t", parts.job.job_id).status is not JobStatus.WAITING_FOR_HUMAN:
            await asyncio.sleep(0.01)
        _take(parts.svc, parts.job, parts.clock)
        continue_job(parts.svc, "t", parts.job.job_id, note=None)
        await asyncio.wait_for(waiting, 5)
        assert not ctx.takeover.free  # the next step waits for the hand-back
        await ctx.takeover.close()

    asyncio.run(scenario())
