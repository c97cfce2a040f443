"""click and fill. Both act on the first element the selector matches."""

from __future__ import annotations

from browser_task.context import RunContext
from pagefleet.workflow import Click, Fill


async def click(step: Click, ctx: RunContext) -> None:
    await ctx.page.locator(step.selector).first.click(
        button=step.button, click_count=step.click_count, timeout=ctx.timeout_ms(step)
    )


async def fill(step: Fill, ctx: RunContext) -> None:
    await ctx.page.locator(step.selector).first.fill(step.value, timeout=ctx.timeout_ms(step))
