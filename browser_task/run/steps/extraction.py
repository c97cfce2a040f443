"""extract (single, many, records) and assert.

Single: waits (up to the step timeout) for the element to be attached; if it never is, the
step fails. ``many`` and ``fields``: read every element matching right now, in one round
trip per field, and give a list (possibly empty) — put a ``wait_for`` first when the list
renders late.

Inside a paginate block every extract result is a list that grows page by page: ``many``
and ``fields`` results are appended to, single values are collected.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import expect

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from browser_task.run.url_patterns import pattern
from pagefleet.workflow import Assert, Extract

# One evaluate for all matches instead of one round trip per element.
_MANY_JS = {
    "text": "els => els.map(e => (e.textContent || '').trim())",
    "inner_text": "els => els.map(e => e.innerText)",
    "html": "els => els.map(e => e.innerHTML)",
    "attribute": "(els, name) => els.map(e => e.getAttribute(name))",
    "value": "els => els.map(e => ('value' in e) ? e.value : null)",
}
# Read one value from an element; shared by rows (``fields``) and their first sub-match.
_ONE_JS = {
    "text": "(e, _) => (e.textContent || '').trim()",
    "inner_text": "(e, _) => e.innerText",
    "html": "(e, _) => e.innerHTML",
    "attribute": "(e, name) => e.getAttribute(name)",
    "value": "(e, _) => ('value' in e) ? e.value : null",
}


def _read_in_rows_js(kind: str) -> str:
    """For each row: the value of the field's first match inside it (null when absent)."""
    return (
        "(rows, [sel, name]) => rows.map(r => { const e = sel === null ? r : "
        f"r.querySelector(sel); return e ? ({_ONE_JS[kind]})(e, name) : null; }})"
    )


async def extract(step: Extract, ctx: RunContext) -> None:
    locator = ctx.scope(step.frame).locator(step.selector)
    timeout = ctx.timeout_ms(step)
    value: Any
    if step.kind == "count":
        value = await locator.count()
    elif step.fields is not None:
        value = await _records(step, ctx)
    elif step.many:
        value = await locator.evaluate_all(_MANY_JS[step.kind], step.attribute)
    else:
        first = locator.first
        if step.kind == "text":
            text = await first.text_content(timeout=timeout)
            value = (text or "").strip()
        elif step.kind == "inner_text":
            value = await first.inner_text(timeout=timeout)
        elif step.kind == "html":
            value = await first.inner_html(timeout=timeout)
        elif step.kind == "value":
            value = await first.input_value(timeout=timeout)
        else:
            assert step.attribute is not None
            value = await first.get_attribute(step.attribute, timeout=timeout)
    store(ctx, step.name, value, many=step.many or step.fields is not None)


async def _records(step: Extract, ctx: RunContext) -> list[dict[str, Any]]:
    """One record per row; each field read inside its row, None when the row lacks it.

    Field selectors are CSS (read with querySelector in the page, one round trip per field
    for all rows) — Playwright-only selector engines (text=, xpath=) are not available there.
    """
    assert step.fields is not None
    rows = ctx.scope(step.frame).locator(step.selector)
    columns: dict[str, list[Any]] = {}
    for name, spec in step.fields.items():
        try:
            columns[name] = await rows.evaluate_all(
                _read_in_rows_js(spec.kind), [spec.selector, spec.attribute]
            )
        except PlaywrightError as exc:
            if "is not a valid selector" in str(exc):
                raise FailJob(
                    f"field {name!r}: {spec.selector!r} is not a valid CSS selector "
                    "(field selectors are CSS, relative to the row)",
                    kind="invalid_workflow",
                ) from None
            raise
    count = min((len(v) for v in columns.values()), default=0)
    return [{name: columns[name][i] for name in columns} for i in range(count)]


def store(ctx: RunContext, name: str, value: Any, *, many: bool) -> None:
    if ctx.paginate_depth == 0:
        ctx.result[name] = value
        return
    collected = ctx.result.setdefault(name, [])
    if not isinstance(collected, list):  # set before the block by a single extract
        collected = ctx.result[name] = [collected]
    if many and isinstance(value, list):
        collected.extend(value)
    else:
        collected.append(value)


ASSERT_POLL_S = 0.1


async def assert_page(step: Assert, ctx: RunContext) -> None:
    """Checks poll until the step timeout, so a page that settles late still passes."""
    timeout = ctx.timeout_ms(step)
    scope = ctx.scope(step.frame)
    try:
        if step.text_contains is not None:
            body = scope.locator("body")
            await expect(body).to_contain_text(step.text_contains, timeout=timeout)
        elif step.visible is not None:
            assert step.selector is not None
            element = scope.locator(step.selector).first
            if step.visible:
                await expect(element).to_be_visible(timeout=timeout)
            else:
                await expect(element).to_be_hidden(timeout=timeout)
        elif step.url_matches is not None:
            await _url_matches(step.url_matches, ctx, timeout)
    except AssertionError:
        raise FailJob(_assert_message(step, ctx, timeout), kind="assertion_failed") from None


async def _url_matches(source: str, ctx: RunContext, timeout_ms: int) -> None:
    # Searched anywhere in the URL, with a bound (browser_task.run.url_patterns).
    compiled, budget = pattern(source), ctx.url_budget
    deadline = time.monotonic() + timeout_ms / 1000
    while not budget.search(compiled, ctx.page.url, f"url_matches {source!r}"):
        budget.raise_overrun()
        if time.monotonic() >= deadline:
            raise AssertionError
        await asyncio.sleep(ASSERT_POLL_S)


def _assert_message(step: Assert, ctx: RunContext, timeout_ms: int) -> str:
    where = f" in frame {step.frame!r}" if step.frame else ""
    within = f"within {timeout_ms} ms"
    if step.text_contains is not None:
        return f"assertion failed: the page{where} does not show {step.text_contains!r} {within}"
    if step.visible is not None:
        state = "visible" if step.visible else "hidden"
        return f"assertion failed: {step.selector!r}{where} is not {state} {within}"
    return (
        f"assertion failed: the URL {ctx.page.url!r} does not match {step.url_matches!r} {within}"
    )
