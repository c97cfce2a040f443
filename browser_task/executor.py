"""Run a job's workflow on a page: render each step, dispatch it, classify what went wrong.

Every error leaving ``run_workflow`` is a ``JobFailure`` carrying the step index, the step
(described with secret values masked) and a reason a user can act on.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Request, Route
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from pydantic import ValidationError

from browser_task.context import RunContext, is_navigation
from browser_task.egress import UNRESOLVED_PREFIX
from browser_task.errors import (
    FailJob,
    JobFailure,
    RetryJob,
    RotateBrowser,
    classify_navigation_error,
    first_line,
    is_closed_error,
)
from browser_task.steps import HANDLERS
from pagefleet.resources import DEBUG
from pagefleet.workflow import STEP_ADAPTER, Goto, Step
from pagefleet.workflow.templating import references, render

FAILURE_SCREENSHOT = "failure.png"
FAILURE_SCREENSHOT_TIMEOUT_MS = 3_000
# The job record lives in one DynamoDB item (400 KB); keep the result well inside it.
MAX_RESULT_BYTES = 256 * 1024


async def install_egress_guard(ctx: RunContext) -> None:
    """Route every request of the job's context through the egress policy."""
    guard = ctx.guard

    async def _route(route: Route, request: Request) -> None:
        verdict = await guard.check(request.url)
        with contextlib.suppress(PlaywrightError):  # the context may be closing
            if verdict.allowed:
                await route.continue_()
            else:
                await route.abort("blockedbyclient")

    await ctx.session.context.route("**/*", _route)


async def render_step(step: Step, ctx: RunContext) -> Step:
    """Substitute ``{{inputs.x}}`` / ``{{secrets.NAME}}`` right before the step runs."""
    raw = step.model_dump(exclude_none=True)
    refs = list(references(raw))
    if not refs:
        return step
    secrets: dict[str, str] = {}
    for namespace, name in refs:
        if namespace != "secrets" or name in secrets:
            continue
        value = await ctx.secrets.resolve(ctx.tenant_id, name)
        if value is None:
            raise FailJob(f"secret {name} not found", kind="secret_not_found")
        secrets[name] = value
        ctx.secret_values.add(value)
    try:
        rendered = render(raw, ctx.request.inputs, secrets)
    except KeyError as exc:
        raise FailJob(f"{{{{{exc.args[0]}}}}} has no value", kind="invalid_workflow") from exc
    try:
        return STEP_ADAPTER.validate_python(rendered)
    except ValidationError as exc:
        problem = ctx.mask(exc.errors()[0].get("msg", "invalid value"))
        raise FailJob(
            f"after templating the step is invalid: {problem}", kind="invalid_workflow"
        ) from exc


def classify_playwright_error(exc: PlaywrightError, step: Step, ctx: RunContext) -> JobFailure:
    message = str(exc.message if hasattr(exc, "message") else exc)
    if ctx.session.crashed or (is_closed_error(message) and not ctx.session.closed):
        return RotateBrowser("the browser crashed while running the step")
    timeout_ms = ctx.timeout_ms(step)
    selector: str | None = getattr(step, "selector", None)
    if isinstance(exc, PlaywrightTimeoutError):
        what = f"{step.action} timed out after {timeout_ms} ms"
        if selector is not None:
            what += f" waiting for selector {selector!r}"
        elif isinstance(step, Goto):
            what += f" loading {step.url}"
        if isinstance(step, Goto):
            # A slow target may well answer next time.
            return RetryJob(what, kind="step_failed", timeout="navigation")
        return FailJob(
            what, kind="step_failed", timeout="navigation" if is_navigation(step) else "action"
        )
    if isinstance(step, Goto):
        if "ERR_BLOCKED_BY_CLIENT" in message and ctx.guard.refusals:
            reason = ctx.guard.refusals[-1]
            if reason.startswith(UNRESOLVED_PREFIX):
                return RetryJob(
                    f"navigation to {step.url} failed: {reason}", kind="navigation_failed"
                )
            return FailJob(f"navigation to {step.url} refused: {reason}", kind="egress_refused")
        return classify_navigation_error(message, step.url)
    target = f" on selector {selector!r}" if selector is not None else ""
    return FailJob(f"{step.action} failed{target}: {first_line(message)}", kind="step_failed")


async def run_workflow(ctx: RunContext) -> dict[str, Any]:
    """Run every step in order; the JSON result (extract name -> value)."""
    for index, step in enumerate(ctx.request.steps):
        ctx.step_index = index
        current: Step = step
        try:
            current = await render_step(step, ctx)
            handler = HANDLERS.get(current.action)
            if handler is None:
                raise FailJob(
                    f"step action {current.action!r} is not supported by this worker yet",
                    kind="invalid_workflow",
                )
            await handler(current, ctx)
        except JobFailure as exc:
            exc.message = ctx.mask(exc.message)
            raise exc.at_step(index, describe(current, ctx)) from None
        except PlaywrightError as exc:
            failure = classify_playwright_error(exc, current, ctx)
            failure.message = ctx.mask(failure.message)
            raise failure.at_step(index, describe(current, ctx)) from None
    ctx.step_index = None
    size = len(_json_bytes(ctx.result))
    if size > MAX_RESULT_BYTES:
        raise FailJob(
            f"the extracted result is {size} bytes, over the {MAX_RESULT_BYTES}-byte limit "
            "of a job record; extract less (for example fewer fields or no html)",
            kind="result_too_large",
        )
    return ctx.result


def describe(step: Step, ctx: RunContext) -> str:
    text = ctx.mask(step.describe())
    if step.label:
        text = f"{step.label}: {text}"
    return text if len(text) <= 500 else text[:499] + "…"


def _json_bytes(value: Any) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":"), default=str).encode()


async def capture_failure_screenshot(ctx: RunContext) -> None:
    """Best effort, bounded: a debug screenshot of the page as it was when the job failed."""
    session = ctx.session
    if session.closed or session.crashed or session.page.is_closed():
        return
    if FAILURE_SCREENSHOT in ctx.artifacts.names:
        return
    try:
        data = await asyncio.wait_for(
            session.page.screenshot(type="png", timeout=FAILURE_SCREENSHOT_TIMEOUT_MS),
            FAILURE_SCREENSHOT_TIMEOUT_MS / 1000 + 0.5,
        )
    except (PlaywrightError, TimeoutError):
        return
    with contextlib.suppress(FailJob):  # too large: skip it rather than mask the real failure
        ctx.artifacts.add(FAILURE_SCREENSHOT, data, "image/png", retention=DEBUG)
