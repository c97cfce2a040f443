"""click, fill, type, press, select, check, uncheck, hover, scroll, upload, drag, dialog.

Each acts on the first element its selector matches (inside ``frame`` when given), and
waits for it up to the step's action timeout — Playwright's actionability checks.
"""

from __future__ import annotations

import base64
import binascii

from playwright.async_api import FilePayload, Locator, Position

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from pagefleet.workflow import (
    Check,
    Click,
    Dialog,
    Drag,
    Fill,
    Hover,
    Press,
    Scroll,
    Select,
    Type,
    Uncheck,
    Upload,
    UploadFile,
)
from pagefleet.workflow.steps.interaction import Point


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
    """Every file at once: a second upload to the same input replaces the first (as a
    person choosing files again does), so several files are one step's ``files``."""
    payloads = [
        FilePayload(name=file.filename, mimeType=file.content_type, buffer=_file_bytes(file, ctx))
        for file in step.uploads()
    ]
    await target(ctx, step.selector, step.frame).set_input_files(
        payloads, timeout=ctx.timeout_ms(step)
    )


def _file_bytes(file: UploadFile, ctx: RunContext) -> bytes:
    raw = file.content if file.input is None else ctx.plan.request.inputs.get(file.input)
    what = f"upload input {file.input!r}" if file.input is not None else "the upload's content"
    if raw is None:  # the request validator already refuses this; keep the worker honest
        raise FailJob(f"{what} is missing", kind="invalid_workflow")
    if file.encoding == "text":
        return str(raw).encode()
    try:
        return base64.b64decode(str(raw), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FailJob(f"{what} is not valid base64: {exc}", kind="invalid_input") from None


async def drag(step: Drag, ctx: RunContext) -> None:
    """Pointer-driven (press, moves, release) like a person; Chromium turns those into the
    HTML5 drag events (dragstart, dragenter, dragover, drop) for draggable elements."""
    scope = ctx.scope(step.frame)
    await scope.locator(step.selector).first.drag_to(
        scope.locator(step.target).first,
        source_position=_position(step.source_position),
        target_position=_position(step.target_position),
        steps=step.steps,
        timeout=ctx.timeout_ms(step),
    )


def _position(point: Point | None) -> Position | None:
    return None if point is None else Position(x=point.x, y=point.y)


async def dialog(step: Dialog, ctx: RunContext) -> None:
    """Arm the answer for the next dialog (browser_task.run.dialogs)."""
    if ctx.dialogs is None:
        raise FailJob("dialog steps are not supported here", kind="invalid_workflow")
    ctx.dialogs.expect(step, ctx.step_index)
