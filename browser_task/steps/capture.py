"""screenshot: the viewport, the full page or one element, as a PNG artifact."""

from __future__ import annotations

from browser_task.context import RunContext
from pagefleet.workflow import Screenshot

PNG = "image/png"


def png_name(name: str) -> str:
    return name if name.lower().endswith(".png") else f"{name}.png"


async def screenshot(step: Screenshot, ctx: RunContext) -> None:
    timeout = ctx.timeout_ms(step)
    if step.selector is not None:
        data = await ctx.page.locator(step.selector).first.screenshot(type="png", timeout=timeout)
    else:
        data = await ctx.page.screenshot(type="png", full_page=step.full_page, timeout=timeout)
    ctx.artifacts.add(png_name(step.name), data, PNG)
