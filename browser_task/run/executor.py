"""Run a job's workflow on a page: render each step, dispatch it, classify what went wrong.

Every error leaving ``run_workflow`` is a ``JobFailure`` carrying the step index, the step
(described with secret values masked; a step inside a block is named by its path, e.g.
``steps[3].steps[1]``) and a reason a user can act on.

The steps come rendered, from the run's plan (``plan.RunPlan``, made by
``prepare.prepare_run`` before any browser work): the step loop only runs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any

from playwright.async_api import BrowserContext, Request
from playwright.async_api import Error as PlaywrightError

from browser_task.browser.setup import ContextSetup
from browser_task.browser.tracing import TraceRecorder, trace_plan
from browser_task.egress.guard import EgressGuard
from browser_task.errors import (
    FailJob,
    JobFailure,
    RunState,
    classify_playwright_error,
    scheme_refused,
)
from browser_task.observe.reporting import step_events
from browser_task.run.context import RunContext, is_navigation
from browser_task.run.expectations import check_expectations
from browser_task.run.failure import keep_page_before
from browser_task.run.irreversible import resume
from browser_task.run.plan import describe
from browser_task.run.steps import HANDLERS, control, session
from pagefleet.specs.resources import ROUTINE
from pagefleet.workflow import Paginate, Step, UseSession

DATA_ARTIFACT = "data.json"
# A cap on what one job may extract. The job record keeps only a small result inline
# (pagefleet.jobs.record_size); a bigger one is read from DATA_ARTIFACT, uploaded below.
MAX_RESULT_BYTES = 256 * 1024


# --- the browser context ---------------------------------------------------------------------
def scheme_guard(guard: EgressGuard) -> ContextSetup:
    """Context setup: stop the job at the first request for a scheme other than http(s).

    Addresses are checked by the worker's egress proxy, which sees every connection the
    browser makes (rebinding-proof); this adds the scheme check (``file:``, ``chrome:``,
    ``view-source:``, ...), which no proxy sees. ``goto`` refuses such URLs before the
    browser, and Chromium refuses them when a page navigates to them, so this watch is the
    backstop: a forbidden request closes the context at once and the job fails
    ``egress_refused``. A watch rather than a Playwright route because routing pauses every
    request for a round trip to the driver, which cost ~55 ms of CPU per job (about 7 % of a
    worker's throughput) for a case the two checks before it already cover.
    """

    async def install(context: BrowserContext) -> None:
        # The close it started, held: the loop keeps only a weak reference to a task.
        closing: set[asyncio.Future[None]] = set()

        async def close() -> None:
            with contextlib.suppress(PlaywrightError):
                await context.close()

        def on_request(request: Request) -> None:
            if guard.stopped is not None:
                return
            verdict = guard.check_scheme(request.url)
            if not verdict.allowed:
                guard.stopped = verdict.reason
                # Started as the event arrives, so the close reaches the browser before the
                # step that is waiting can send its next command.
                task = asyncio.ensure_future(close())
                closing.add(task)
                task.add_done_callback(closing.discard)

        context.on("request", on_request)

    return install


async def start_tracing(ctx: RunContext) -> None:
    """Record the attempt's trace from the start, when its mode records one (see tracing.py
    for the modes, and the secrets exception)."""
    if ctx.trace is not None:
        return
    plan = ctx.plan
    wanted = trace_plan(plan.request.options.trace, plan.tries, secrets=bool(plan.masker))
    if wanted is None:
        return
    recorder = TraceRecorder(ctx.session.context, wanted)
    try:
        await recorder.start()
    except PlaywrightError:
        if wanted.on_success:  # asked to keep it whatever happens: a job's own output
            raise
        return  # kept only for a failure: a debugging aid; never fail a job for lack of one
    ctx.trace = recorder


def run_state(step: Step, ctx: RunContext) -> RunState:
    """What the run knows for classifying a Playwright error of ``step`` (browser_task.errors)."""
    return RunState(
        timeout_ms=ctx.timeout_ms(step),
        timeout="navigation" if is_navigation(step) else "action",
        stopped=ctx.guard.stopped,
        crashed=ctx.session.crashed,
        closed=ctx.session.closed,
        refusals=ctx.guard.refusals,
        tunnel_refusals=ctx.egress_refusals,
    )


async def run_workflow(ctx: RunContext) -> dict[str, Any]:
    """Run every step in order; the JSON result (extract name -> value).

    On success the extracted result is also kept as ``data.json`` and a requested trace is
    written; on failure the worker calls ``failure.capture_failure_artifacts``. An attempt
    after one that reached an irreversible step settles it first (``irreversible.resume``:
    its check) and may go on after it rather than from the start.
    """
    plan = ctx.plan
    await start_tracing(ctx)
    first = await resume(ctx, run_steps) if ctx.progress and ctx.progress.checkpoints else 0
    await run_steps(plan.steps[first:], ctx, first=first, labels=plan.labels[first:])
    _no_dialog_left_waiting(ctx)
    ctx.step_index = None
    # A page may echo a secret back (a filled field read by extract): never store it.
    ctx.result = ctx.masker.value(ctx.result)
    data = _json_bytes(ctx.result)
    if len(data) > MAX_RESULT_BYTES:
        raise FailJob(
            f"the extracted result is {len(data)} bytes, over the {MAX_RESULT_BYTES}-byte limit "
            "of a job's result; extract less (for example fewer fields or no html)",
            kind="result_too_large",
        )
    await check_expectations(ctx)
    if ctx.result:
        ctx.artifacts.add(DATA_ARTIFACT, data, "application/json", retention=ROUTINE)
    if ctx.trace is not None:
        await ctx.trace.finish(ctx.artifacts, failed=False)
    return ctx.result


async def run_steps(
    steps: Sequence[Step],
    ctx: RunContext,
    prefix: str = "",
    *,
    name: str = "steps",
    first: int = 0,
    labels: Sequence[str] | None = None,
) -> None:
    """Run rendered steps in order. ``prefix`` is the path of the enclosing block
    (``steps[3].``), ``name`` the list they are in (``check``, ``compensate``), ``first`` the
    index of the first of them (an attempt that goes on after an irreversible step),
    ``labels`` how events name them (the plan's, as submitted; else from the steps)."""
    top = not prefix and name == "steps"
    # A browser session numbers its steps past its (empty) request's.
    of = max(len(ctx.plan.steps), first + len(steps) if top else 0)
    for offset, step in enumerate(steps):
        index = first + offset
        path = str(index) if top else f"{prefix}{name}[{index}]"
        if top:
            takeover = ctx.takeover  # read in place: a job nobody takes over calls nothing
            if takeover is not None and takeover.held is not None:
                await ctx.hold_for_person(index)  # a person holding the page: the step waits
            ctx.step_index = index
        label = labels[offset] if labels is not None else describe(step, ctx.masker)
        with step_events(ctx.events, ctx.step_index, of, path, step.action, label):
            try:
                if ctx.guard.stopped is not None:
                    raise scheme_refused(ctx.guard.stopped)
                if top and step.irreversible:
                    # Checkpointed around what it does (started, done).
                    await _irreversible(step, ctx, index, label, path)
                else:
                    await _dispatch(step, ctx, index if top else None, path)
                ctx.url_budget.raise_overrun()  # a glob's search ran over during the step
                if ctx.dialogs is not None:
                    ctx.dialogs.raise_problem()  # a dialog this step opened was not expected
            except JobFailure as exc:
                exc.message = ctx.mask(exc.message)
                raise _at(exc, path, step, ctx) from None
            except PlaywrightError as exc:
                # A glob's search that ran over is why a wait for a URL never ended.
                failure = ctx.url_budget.failure() or classify_playwright_error(
                    exc, step, run_state(step, ctx)
                )
                failure.message = ctx.mask(failure.message)
                raise _at(failure, path, step, ctx) from None


async def _irreversible(step: Step, ctx: RunContext, index: int, label: str, path: str) -> None:
    await keep_page_before(ctx)
    if ctx.progress is None:
        await _dispatch(step, ctx, index, path)
        return
    async with ctx.progress.around(index, step.label or label, lambda: ctx.result):
        await _dispatch(step, ctx, index, path)


async def _dispatch(step: Step, ctx: RunContext, top_index: int | None, path: str) -> None:
    if isinstance(step, Paginate):
        await control.paginate(
            step, ctx, f"steps[{top_index}]" if top_index is not None else path, run_steps
        )
    elif isinstance(step, UseSession):
        await session.use_session(step, ctx, top_index)
    else:
        handler = HANDLERS.get(step.action)
        if handler is None:
            raise FailJob(
                f"step action {step.action!r} is not supported by this worker yet",
                kind="invalid_workflow",
            )
        await handler(step, ctx)


def _no_dialog_left_waiting(ctx: RunContext) -> None:
    """A ``dialog`` step whose dialog never came fails the run, at that step."""
    unmet = ctx.dialogs.unmet() if ctx.dialogs is not None else None
    if unmet is None or unmet.index is None:
        return
    ctx.step_index = unmet.index
    failure = FailJob(
        "the dialog step expected a dialog, and none came before the steps ended "
        "(put it before the step that opens the dialog)",
        kind="assertion_failed",
    )
    raise _at(failure, str(unmet.index), unmet.step, ctx)


def _at(failure: JobFailure, path: str, step: Step, ctx: RunContext) -> JobFailure:
    """Name the failing step: its index at the top level, its full path inside a block."""
    assert ctx.step_index is not None
    if failure.origin is not None and ctx.mask(failure.origin) != failure.origin:
        failure.origin = None  # a host made of a secret is never stored (breakers, listings)
    text = describe(step, ctx.masker)
    if not path.isdigit():  # inside a block, a check or the compensating steps
        text = f"{path} {text}"
    return failure.at_step(ctx.step_index, text)


def step_text(index: int | None, ctx: RunContext) -> str | None:
    """The step at ``index`` as errors name it (a browser session's are not in its plan)."""
    if index is None or index >= len(ctx.plan.labels):
        return None
    return ctx.plan.labels[index]


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()
