"""click, fill, type, press, select, check, uncheck, hover, scroll, upload.

Each acts on the first element its selector matches (inside ``frame`` when given), and
waits for it up to the step's action timeout — Playwright's actionability checks.
"""

from __future__ import annotations

import base64
import binascii

from playwright.async_api import FilePayload, Locator

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from pagefleet.workflow import (
    Check,
    Click,
    Fill,
    Hover,
    Press,
    Scroll,
    Select,
    Type,
    Uncheck,
    Upload,
)


def target(ctx: RunContext, selector: str, frame: str | list[str] | None) -> Locator:
    return ctx.scope(frame).locator(selector).first


async def click(step: Click, ctx: RunContext) -> None:
    await target(ctx, step.selector, step.frame).click(
        button=step.button, click_count=step.click_count, timeout=ctx.timeout_ms(step)
    )


async def fill(step: Fill, ctx: RunContext) -> None:
    await target(ctx, step.selector, step.frame).fill(step.value, timeout=ctx.timeout_ms(step))


async def type_text(step: Type, ctx: RunContext) -> None:
    # Key by key, so pages that react to keydown/input (autocomplete, masks) see real typing.
    await target(ctx, step.selector, step.frame).press_sequentially(
        step.text, delay=step.delay_ms, timeout=ctx.timeout_ms(step)
    )


async def press(step: Press, ctx: RunContext) -> None:
    await target(ctx, step.selector, step.frame).press(step.key, timeout=ctx.timeout_ms(step))


async def select(step: Select, ctx: RunContext) -> None:
    locator = target(ctx, step.selector, step.frame)
    timeout = ctx.timeout_ms(step)
    if step.value is not None:
        await locator.select_option(value=step.value, timeout=timeout)
    elif step.text is not None:
        await locator.select_option(label=step.text, timeout=timeout)
    else:
        await locator.select_option(index=step.index, timeout=timeout)


async def check(step: Check, ctx: RunContext) -> None:
    await target(ctx, step.selector, step.frame).check(timeout=ctx.timeout_ms(step))


async def uncheck(step: Uncheck, ctx: RunContext) -> None:
    await target(ctx, step.selector, step.frame).uncheck(timeout=ctx.timeout_ms(step))


async def hover(step: Hover, ctx: RunContext) -> None:
    await target(ctx, step.selector, step.frame).hover(timeout=ctx.timeout_ms(step))


# Our own fixed scripts (not tenant code): scroll the window of the element's document.
_SCROLL_BY = "(el, [x, y]) => el.ownerDocument.defaultView.scrollBy(x, y)"
_SCROLL_BOTTOM = (
    "el => { const d = el.ownerDocument;"
    " d.defaultView.scrollTo(0, (d.scrollingElement || d.documentElement).scrollHeight); }"
)


async def scroll(step: Scroll, ctx: RunContext) -> None:
    timeout = ctx.timeout_ms(step)
    if step.selector is not None:
        await target(ctx, step.selector, step.frame).scroll_into_view_if_needed(timeout=timeout)
        return
    root = ctx.scope(step.frame).locator(":root")
    if step.to_bottom:
        await root.evaluate(_SCROLL_BOTTOM, timeout=timeout)
    else:
        await root.evaluate(_SCROLL_BY, [step.x, step.y], timeout=timeout)


async def upload(step: Upload, ctx: RunContext) -> None:
    raw = ctx.plan.request.inputs.get(step.input)
    if raw is None:  # the request validator already refuses this; keep the worker honest
        raise FailJob(f"upload input {step.input!r} is missing", kind="invalid_workflow")
    if step.encoding == "base64":
        try:
            data = base64.b64decode(str(raw), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise FailJob(
                f"upload input {step.input!r} is not valid base64: {exc}", kind="invalid_input"
            ) from None
    else:
        data = str(raw).encode()
    payload = FilePayload(name=step.filename, mimeType=step.content_type, buffer=data)
    await target(ctx, step.selector, step.frame).set_input_files(
        payload, timeout=ctx.timeout_ms(step)
    )
