"""paginate (a repeated block of steps) and evaluate (tenant JavaScript, policy-gated)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from browser_task.run.steps.extraction import store
from pagefleet.workflow import Evaluate, Paginate, Step

# The executor's step loop, passed in (a block runs nested steps under its path).
RunSteps = Callable[[list[Step], RunContext, str], Awaitable[None]]

# The aria-disabled / disabled checks Playwright's is_enabled does not cover for links.
_LOOKS_DISABLED = (
    "e => e.getAttribute('aria-disabled') === 'true' || e.classList.contains('disabled')"
)
# An evaluate result goes into the job record; keep one from filling it by itself.
MAX_EVALUATE_RESULT_BYTES = 64 * 1024


async def paginate(step: Paginate, ctx: RunContext, path: str, run_steps: RunSteps) -> int:
    """Run the block on each page; the number of pages visited.

    Stops when ``next`` is missing, hidden or disabled, or after ``max_pages`` pages.
    """
    timeout = ctx.timeout_ms(step)
    ctx.paginate_depth += 1
    try:
        for number in range(1, step.max_pages + 1):
            await run_steps(step.steps, ctx, f"{path}.")
            if number == step.max_pages:
                return number
            following = ctx.page.locator(step.next).first
            if (
                await following.count() == 0
                or not await following.is_visible()
                or not await following.is_enabled()
                or await following.evaluate(_LOOKS_DISABLED)
            ):
                return number
            # click waits for a navigation it starts to commit; then the new page's load state.
            await following.click(timeout=timeout)
            # "commit" is not a state Playwright waits for; domcontentloaded follows it closely.
            state = "domcontentloaded" if step.wait_until == "commit" else step.wait_until
            await ctx.page.wait_for_load_state(state, timeout=timeout)
        return step.max_pages
    finally:
        ctx.paginate_depth -= 1


async def evaluate(step: Evaluate, ctx: RunContext) -> None:
    # The tenant policy was checked before the browser started (executor.prepare_run);
    # getting here means evaluate is allowed for this tenant.
    timeout = ctx.timeout_ms(step)
    try:
        value = await asyncio.wait_for(ctx.page.evaluate(step.expression), timeout / 1000)
    except TimeoutError:
        raise FailJob(
            f"evaluate timed out after {timeout} ms", kind="step_failed", timeout="action"
        ) from None
    if step.name is None:
        return
    size = len(json.dumps(value, default=str))
    if size > MAX_EVALUATE_RESULT_BYTES:
        raise FailJob(
            f"evaluate {step.name} returned {size} bytes of JSON, over the "
            f"{MAX_EVALUATE_RESULT_BYTES}-byte limit; return less",
            kind="result_too_large",
        )
    store(ctx, step.name, value, many=False)
