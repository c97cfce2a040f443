"""Run a job's workflow on a page: render each step, dispatch it, classify what went wrong.

Every error leaving ``run_workflow`` is a ``JobFailure`` carrying the step index, the step
(described with secret values masked; a step inside a block is named by its path, e.g.
``steps[3].steps[1]``) and a reason a user can act on.

Before any browser work, ``prepare.prepare_run`` settles what would otherwise fail half-way: every
``{{secrets.NAME}}`` is resolved, the tenant's policy is checked for evaluate, and the
sessions of the workflow's leading use_session steps are loaded so the context can be
created with them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

from playwright.async_api import BrowserContext, Request
from playwright.async_api import Error as PlaywrightError
from pydantic import ValidationError

from browser_task.browser.pool import BrowserSession, ContextSetup
from browser_task.browser.tracing import TraceRecorder, traces
from browser_task.egress.guard import EgressGuard
from browser_task.errors import (
    FailJob,
    JobFailure,
    RunState,
    classify_playwright_error,
    scheme_refused,
)
from browser_task.observe.run_events import step_events
from browser_task.run.context import RunContext, is_navigation
from browser_task.run.expectations import check_expectations
from browser_task.run.irreversible import resume
from browser_task.run.prepare import resolve_secret, step_label
from browser_task.run.steps import HANDLERS, control, session
from pagefleet.jobs.models import JobRequest
from pagefleet.specs.resources import DEBUG, ROUTINE
from pagefleet.workflow import STEP_ADAPTER, Paginate, Step, UseSession
from pagefleet.workflow.templating import job_fields, references, render

FAILURE_SCREENSHOT = "failure.png"
FAILURE_HTML = "failure.html"
FAILURE_SCREENSHOT_TIMEOUT_MS = 3_000
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
        async def on_request(request: Request) -> None:
            # Playwright starts this as a task when the event arrives, so the close reaches
            # the browser before the step that is waiting can send its next command.
            if guard.stopped is not None:
                return
            verdict = guard.check_scheme(request.url)
            if not verdict.allowed:
                guard.stopped = verdict.reason
                with contextlib.suppress(PlaywrightError):
                    await context.close()

        context.on("request", on_request)

    return install


async def start_tracing(ctx: RunContext) -> None:
    """Record a trace from the start (see tracing.py for why, and the secrets exception)."""
    requested = ctx.request.options.trace
    if ctx.trace is not None or not traces(requested, secrets=bool(ctx.prepared.secrets)):
        return
    recorder = TraceRecorder(ctx.session.context, requested=requested)
    try:
        await recorder.start()
    except PlaywrightError:
        if requested:
            raise
        return  # a trace is a debugging aid; never fail a job for lack of one
    ctx.trace = recorder


async def render_step(step: Step, ctx: RunContext) -> Step:
    """Substitute ``{{inputs.x}}`` / ``{{secrets.NAME}}`` right before the step runs."""
    raw = step.model_dump(exclude_none=True)
    refs = list(references(raw))
    if not refs:
        return step
    secrets = dict(ctx.prepared.secrets)
    for namespace, name in refs:
        if namespace != "secrets" or name in secrets:
            continue
        # Normally resolved up front by prepare_run; kept for callers that skip it.
        value = await resolve_secret(ctx.secrets, ctx.tenant_id, name)
        if value is None:
            raise FailJob(f"secret {name} not found", kind="secret_not_found")
        secrets[name] = value
        ctx.secret_values.add(value)
    try:
        job = job_fields(ctx.job_id, ctx.idempotency_key)
        rendered = render(raw, ctx.request.inputs, secrets, ctx.prepared.parents, job)
    except KeyError as exc:
        raise FailJob(f"{{{{{exc.args[0]}}}}} has no value", kind="invalid_workflow") from exc
    try:
        return STEP_ADAPTER.validate_python(rendered)
    except ValidationError as exc:
        problem = ctx.mask(exc.errors()[0].get("msg", "invalid value"))
        raise FailJob(
            f"after templating the step is invalid: {problem}", kind="invalid_workflow"
        ) from exc


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
    written; on failure the worker calls ``capture_failure_artifacts``. An attempt after one
    that reached an irreversible step settles it first (``irreversible.resume``: its check)
    and may go on after it rather than from the start.
    """
    await start_tracing(ctx)
    first = await resume(ctx, run_steps, render_step)
    await run_steps(ctx.request.steps[first:], ctx, first=first)
    ctx.step_index = None
    if ctx.secret_values:
        # A page may echo a secret back (a filled field read by extract): never store it.
        ctx.result = mask_values(ctx.result, ctx)
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
    steps: list[Step], ctx: RunContext, prefix: str = "", *, name: str = "steps", first: int = 0
) -> None:
    """Run steps in order. ``prefix`` is the path of the enclosing block (``steps[3].``),
    ``name`` the list they are in (``check``, ``compensate``), ``first`` the index of the
    first of them (an attempt that goes on after an irreversible step)."""
    top = not prefix and name == "steps"
    for index, step in enumerate(steps, start=first):
        path = str(index) if top else f"{prefix}{name}[{index}]"
        if top:
            ctx.step_index = index
        current: Step = step
        # A browser session numbers its steps past its (empty) request's.
        of = max(len(ctx.request.steps), first + len(steps) if top else 0)
        label = describe(step, ctx)
        with step_events(ctx.events, ctx.step_index, of, path, step.action, label):
            try:
                if ctx.guard.stopped is not None:
                    raise scheme_refused(ctx.guard.stopped)
                current = await render_step(step, ctx)
                # An irreversible step is checkpointed around what it does (started, done).
                acting = (
                    ctx.progress.around(index, step.label or label, lambda: ctx.result)
                    if top and step.irreversible and ctx.progress is not None
                    else contextlib.nullcontext()
                )
                if top and step.irreversible:
                    await keep_page_before(ctx)
                async with acting:
                    await _dispatch(current, ctx, index if top else None, path, run_steps)
            except JobFailure as exc:
                exc.message = ctx.mask(exc.message)
                raise _at(exc, path, current, ctx) from None
            except PlaywrightError as exc:
                failure = classify_playwright_error(exc, current, run_state(current, ctx))
                failure.message = ctx.mask(failure.message)
                raise _at(failure, path, current, ctx) from None


async def _dispatch(
    step: Step, ctx: RunContext, top_index: int | None, path: str, run: Any
) -> None:
    if isinstance(step, Paginate):
        await control.paginate(
            step, ctx, f"steps[{top_index}]" if top_index is not None else path, run
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


def _at(failure: JobFailure, path: str, step: Step, ctx: RunContext) -> JobFailure:
    """Name the failing step: its index at the top level, its full path inside a block."""
    assert ctx.step_index is not None
    if failure.origin is not None and ctx.mask(failure.origin) != failure.origin:
        failure.origin = None  # a host made of a secret is never stored (breakers, listings)
    text = describe(step, ctx)
    if not path.isdigit():  # inside a block, a check or the compensating steps
        text = f"{path} {text}"
    return failure.at_step(ctx.step_index, text)


def describe(step: Step, ctx: RunContext) -> str:
    return step_label(step, ctx.mask(step.describe()))


def step_text(request: JobRequest, index: int | None, ctx: RunContext) -> str | None:
    """The step at ``index`` as errors name it (a browser session's are not in its request)."""
    if index is None or index >= len(request.steps):
        return None
    return describe(request.steps[index], ctx)


def mask_values(value: Any, ctx: RunContext) -> Any:
    if isinstance(value, str):
        return ctx.mask(value)
    if isinstance(value, dict):
        return {k: mask_values(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_values(v, ctx) for v in value]
    return value


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


async def _screenshot(session: BrowserSession) -> bytes:
    """The page as shown; a page still waiting for a navigation's answer never settles its
    fonts for Playwright's screenshot, so the compositor's picture is taken instead."""
    page = session.page
    timeout_s = FAILURE_SCREENSHOT_TIMEOUT_MS / 1000
    try:
        return await asyncio.wait_for(
            page.screenshot(type="png", timeout=FAILURE_SCREENSHOT_TIMEOUT_MS), timeout_s + 0.5
        )
    except (PlaywrightError, TimeoutError):
        cdp = await session.context.new_cdp_session(page)
        shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", {"format": "png"}), 2)
        return base64.b64decode(shot["data"])


async def keep_page_before(ctx: RunContext) -> None:
    """The page's HTML as an irreversible step is about to act (bounded, best effort): the
    failure's HTML when the page is still waiting for the step's answer at the end."""
    with contextlib.suppress(PlaywrightError, TimeoutError):
        ctx.html_before_irreversible = await asyncio.wait_for(ctx.page.content(), 1.0)


async def capture_failure_artifacts(ctx: RunContext) -> None:
    """Best effort, bounded: the page as it was when the job failed, and the trace.

    ``failure.png`` and ``failure.html`` (debug retention), plus ``trace.zip`` when tracing
    ran. Nothing here may replace the real failure with another one.
    """
    session = ctx.session
    alive = not (session.closed or session.crashed or session.page.is_closed())
    if alive and FAILURE_SCREENSHOT not in ctx.artifacts.names:
        with contextlib.suppress(PlaywrightError, TimeoutError, FailJob):
            data = await _screenshot(session)
            ctx.artifacts.add(FAILURE_SCREENSHOT, data, "image/png", retention=DEBUG)
    if alive and FAILURE_HTML not in ctx.artifacts.names:
        html: str | None = None
        try:
            html = await asyncio.wait_for(
                session.page.content(), FAILURE_SCREENSHOT_TIMEOUT_MS / 1000
            )
        except (PlaywrightError, TimeoutError):
            # Waiting for an answer that never came (a posted form): the page as it was
            # before its irreversible step acted, which is what a reviewer needs.
            html = ctx.html_before_irreversible
        if html is not None:
            with contextlib.suppress(FailJob):
                page_html = ctx.mask(html).encode()
                ctx.artifacts.add(
                    FAILURE_HTML, page_html, "text/html; charset=utf-8", retention=DEBUG
                )
    if ctx.trace is not None and not session.closed and not session.crashed:
        await ctx.trace.finish(ctx.artifacts, failed=True)
