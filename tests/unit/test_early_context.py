"""Opening a job's context while its claim is written (browser_task.run.early): which jobs may,
and that a context nobody will use is closed (no browser, no AWS: a recording pool)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from browser_task.browser.tracing import TracePlan, TraceRecorder
from browser_task.egress.guard import EgressGuard
from browser_task.run.early import EarlyContext, open_early, with_trace
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.preview import Preview, opens_early, preview_of

GOTO = {"action": "goto", "url": "http://127.0.0.1:9/"}
FOR_FAILURES = TracePlan("retain-on-failure", on_success=False, on_failure=True)


def request(**fields: Any) -> JobRequest:
    return JobRequest.model_validate({"steps": [GOTO], **fields})


def preview(job: JobRequest, attempt: int) -> Preview:
    return preview_of(job, attempt=attempt, events_on_record=True)


class Session:
    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


class Tracing:
    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    async def start(self, **kwargs: Any) -> None:
        self.started.append(kwargs)


class Context:
    def __init__(self) -> None:
        self.tracing = Tracing()
        self.listeners: list[str] = []

    def on(self, event: str, handler: Any) -> None:
        self.listeners.append(event)


class Pool:
    """Opens a recorded session; runs the setup on a stand-in context, as the pool does."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.opened: list[JobOptions] = []
        self.sessions: list[Session] = []
        self.context = Context()

    async def new_session(self, options: JobOptions, setup: Any = None, **_: Any) -> Session:
        self.opened.append(options)
        if setup is not None:
            await setup(self.context)
        if self.fail:
            raise RuntimeError("browser gone")
        self.sessions.append(Session())
        return self.sessions[-1]


async def _no_lookups(host: str) -> list[str]:
    raise AssertionError(f"nothing here resolves {host}")


def guard() -> EgressGuard:
    return EgressGuard(allow_loopback=True, resolver=_no_lookups)


@pytest.mark.parametrize(
    ("fields", "early"),
    [
        ({}, True),
        ({"options": {"locale": "de-DE", "trace": True}}, True),
        # Its own proxy gets its own egress listener, made for the job.
        ({"options": {"proxy": {"server": "http://proxy.example:3128"}}}, False),
        # A warm job takes a parked context instead.
        ({"options": {"isolation": "tenant"}}, False),
        # Options rendered with inputs or secrets are only known after the preparation.
        ({"inputs": {"ua": "pf/1"}, "options": {"user_agent": "{{inputs.ua}}"}}, False),
        (
            {"options": {"extra_headers": {"Authorization": "Bearer {{secrets.TOKEN}}"}}},
            False,
        ),
        # A saved login is the context's storage state, read from the tenant's sessions.
        ({"steps": [{"action": "use_session", "name": "login"}, GOTO]}, False),
    ],
)
def test_which_jobs_open_their_context_while_the_claim_is_written(
    fields: dict[str, Any], early: bool
) -> None:
    assert opens_early(request(**fields)) is early


def test_a_context_opened_early_starts_the_trace_and_is_used_as_it_is() -> None:
    async def go() -> tuple[Pool, EarlyContext | None]:
        pool = Pool()
        # The default mode records on a retry: a second attempt's context starts one.
        early = open_early(pool, preview(request(), 2), guard())  # type: ignore[arg-type]
        assert early is not None
        await early.opening
        return pool, early

    pool, early = asyncio.run(go())
    assert early is not None
    assert early.trace is not None and early.trace.started
    # The scheme guard watches every request; the trace is released however the context ends.
    assert sorted(pool.context.listeners) == ["close", "request"]
    # Recorded only where it is wanted, so with DOM snapshots.
    assert pool.context.tracing.started == [
        {"screenshots": False, "snapshots": True, "sources": False}
    ]
    assert early.fits(JobOptions(), storage_state=None)
    assert not early.fits(JobOptions(locale="de-DE"), storage_state=None)
    assert not early.fits(JobOptions(), storage_state={"cookies": []})


def test_a_first_attempt_in_the_default_mode_opens_early_without_a_trace() -> None:
    async def go() -> tuple[Pool, EarlyContext | None]:
        pool = Pool()
        early = open_early(pool, preview(request(), 1), guard())  # type: ignore[arg-type]
        assert early is not None
        await early.opening
        return pool, early

    pool, early = asyncio.run(go())
    assert early is not None and early.trace is None
    assert pool.context.tracing.started == []
    assert pool.context.listeners == ["request"]


def test_a_job_using_secrets_opens_early_without_a_trace_unless_it_asked_for_every_one() -> None:
    uses_secret = [GOTO, {"action": "fill", "selector": "#p", "value": "{{secrets.PW}}"}]

    async def go(trace: str) -> EarlyContext | None:
        pool = Pool()
        early = open_early(
            pool,  # type: ignore[arg-type]
            preview(request(steps=uses_secret, options={"trace": trace}), 2),
            guard(),
        )
        assert early is not None
        await early.opening
        return early

    retry, failures, asked = (
        asyncio.run(go(m)) for m in ("on-first-retry", "retain-on-failure", "on")
    )
    assert retry is not None and retry.trace is None
    assert failures is not None and failures.trace is None
    assert asked is not None and asked.trace is not None and asked.trace.plan.mode == "on"


def test_a_context_nobody_will_use_is_closed_and_a_failed_open_is_ignored() -> None:
    async def go() -> tuple[Pool, Pool]:
        pool, broken = Pool(), Pool(fail=True)
        early = open_early(pool, preview(request(), 1), guard())  # type: ignore[arg-type]
        failed = open_early(broken, preview(request(), 1), guard())  # type: ignore[arg-type]
        assert early is not None and failed is not None
        await early.discard()  # e.g. the claim went to another worker
        await failed.discard()  # nothing to close, nothing raised
        return pool, broken

    pool, broken = asyncio.run(go())
    assert [s.closed for s in pool.sessions] == [1]
    assert broken.sessions == []


def test_the_trace_starts_beside_the_setup_and_a_refusal_to_start_is_not_fatal() -> None:
    from playwright.async_api import Error as PlaywrightError

    order: list[str] = []

    async def setup(context: Any) -> None:
        order.append("setup")

    class Refusing(Tracing):
        async def start(self, **kwargs: Any) -> None:
            raise PlaywrightError("tracing has been already started")

    async def go() -> TraceRecorder:
        context = Context()
        context.tracing = Refusing()
        trace = TraceRecorder(None, FOR_FAILURES)
        await with_trace(setup, trace)(context)  # type: ignore[arg-type]
        return trace

    trace = asyncio.run(go())
    assert order == ["setup"]
    assert not trace.started  # the workflow tries again before its first step


class Stoppable(Tracing):
    def __init__(self) -> None:
        super().__init__()
        self.stops: list[str | None] = []

    async def stop(self, path: str | None = None) -> None:
        self.stops.append(path)


class Closable(Context):
    """A context whose ``close`` event runs its handlers, as Playwright's does."""

    def __init__(self) -> None:
        super().__init__()
        self.tracing: Stoppable = Stoppable()
        self.handlers: dict[str, list[Any]] = {}

    def on(self, event: str, handler: Any) -> None:
        super().on(event, handler)
        self.handlers.setdefault(event, []).append(handler)

    def remove_listener(self, event: str, handler: Any) -> None:
        self.handlers[event].remove(handler)

    async def closed(self) -> None:
        for handler in list(self.handlers.get("close", [])):
            await handler(self)


def test_a_trace_is_stopped_once_however_its_context_ends() -> None:
    """Playwright keeps a started trace's temporary directory and stack list until
    ``tracing.stop``: a job's end, and a context closed under it, must both stop it."""

    async def go() -> tuple[list[str | None], list[str | None], list[str | None]]:
        # A successful job that kept no trace: stopped at its end, not again at the close.
        done = Closable()
        trace = TraceRecorder(done, FOR_FAILURES)  # type: ignore[arg-type]
        await trace.start()
        await trace.finish(None, failed=False)  # type: ignore[arg-type]
        await done.closed()
        # A context closed before the job could finish (a guard, a crash, a lost claim).
        cut = Closable()
        early = TraceRecorder(None, FOR_FAILURES)
        await with_trace(lambda _c: asyncio.sleep(0), early)(cut)  # type: ignore[arg-type]
        await cut.closed()
        await early.finish(None, failed=True)  # type: ignore[arg-type]
        # A context that never started its trace has nothing to stop.
        unstarted = Closable()
        TraceRecorder(unstarted, FOR_FAILURES)  # type: ignore[arg-type]
        await unstarted.closed()
        return done.tracing.stops, cut.tracing.stops, unstarted.tracing.stops

    done, cut, unstarted = asyncio.run(go())
    assert done == [None]  # stopped without a path: nothing written
    assert cut == [None]
    assert unstarted == []
