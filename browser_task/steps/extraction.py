"""extract: text, attribute, html or inner_text of the first match, or of every match.

Single: waits (up to the step timeout) for the element to be attached; if it never is, the
step fails. ``many``: reads every element matching right now, in one round trip, and gives
a list (possibly empty) — put a ``wait_for`` first when the list renders late.
"""

from __future__ import annotations

from typing import Any

from browser_task.context import RunContext
from pagefleet.workflow import Extract

# One evaluate for all matches instead of one round trip per element.
_MANY_JS = {
    "text": "els => els.map(e => (e.textContent || '').trim())",
    "inner_text": "els => els.map(e => e.innerText)",
    "html": "els => els.map(e => e.innerHTML)",
    "attribute": "(els, name) => els.map(e => e.getAttribute(name))",
}


async def extract(step: Extract, ctx: RunContext) -> None:
    locator = ctx.page.locator(step.selector)
    timeout = ctx.timeout_ms(step)
    value: Any
    if step.many:
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
        else:
            assert step.attribute is not None
            value = await first.get_attribute(step.attribute, timeout=timeout)
    ctx.result[step.name] = value
