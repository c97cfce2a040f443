"""What a browser session's answer shows of the page after its steps: its URL and title,
the dialogs since the last look, an ARIA snapshot (whole, scoped, cut or a diff), the tabs
when there are several, a screenshot if asked. What is too large inline is kept apart
(``session_parts``). Also: a step's ``aria-ref=`` selector made the lasting one it names.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError

from browser_task.errors import FailJob, JobFailure, first_line
from browser_task.observe.aria import aria_snapshot
from browser_task.observe.aria_view import shape
from browser_task.run.context import RunContext
from browser_task.run.session_parts import AnswerParts, answer_error
from pagefleet.browsing.models import Answer, AriaView, Observation, Observe
from pagefleet.specs.resources import DEBUG
from pagefleet.workflow import STEP_ADAPTER, Step

OBSERVE_TIMEOUT_MS = 5_000
# The selector of an element by its ref in an "ai" ARIA snapshot.
ARIA_REF = "aria-ref="


class PageObserver:
    """One session's looks at its page (a diff is against the last look at the same scope)."""

    def __init__(self, ctx: RunContext, parts: AnswerParts) -> None:
        self._ctx = ctx
        self._parts = parts
        # The last ARIA snapshot of each scope observed ("" the page's): what a diff is against.
        self._last_aria: dict[str, str] = {}
        self._screenshots = 0

    async def observed(self, answer: Answer, observe: Observe) -> Answer:
        """The page after the steps: URL, title, ARIA snapshot, a screenshot if asked; what
        is too large for the answer kept apart (session_parts)."""
        ctx = self._ctx
        if ctx.page.is_closed() and not ctx.session.page.is_closed():
            ctx.page = ctx.session.page  # the tab switched to closed itself: back to the first
        page = ctx.page
        if ctx.session.closed or page.is_closed():
            return await self._parts.bounded(answer, None)
        seen: dict[str, Any] = {"url": ctx.mask(page.url)}
        dialogs = ctx.dialogs.drain() if ctx.dialogs is not None else []
        if dialogs:
            seen["dialogs"] = dialogs
        key: str | None = None
        tree: str | None = None
        title = await _title(page)
        if title is not None:
            seen["title"] = ctx.mask(title)
        view = observe.aria_view()
        if view is not None:
            aria, tree = await self._aria(page, view)
            seen.update(aria)
        tabs = await _tabs(page, ctx.mask)
        if tabs:
            seen["tabs"] = tabs
        if observe.screenshot:
            self._screenshots += 1
            name = f"session-{self._screenshots:04d}.png"
            try:
                data = await page.screenshot(type="png", timeout=OBSERVE_TIMEOUT_MS)
                ctx.artifacts.add(name, data, "image/png", retention=DEBUG)
                key = (await ctx.artifacts.uploaded(name)).key
                seen["screenshot"] = name
            except (PlaywrightError, JobFailure) as exc:
                seen["screenshot"] = None
                if answer.error is None:
                    problem = first_line(str(getattr(exc, "message", None) or exc))
                    error = FailJob(f"the screenshot failed: {problem}", kind="observe_failed")
                    answer = answer.model_copy(update={"error": answer_error(error)})
        observation = Observation.model_validate(seen)
        answer = answer.model_copy(update={"observation": observation, "screenshot_key": key})
        return await self._parts.bounded(answer, tree)

    async def _aria(self, page: Any, view: AriaView) -> tuple[dict[str, Any], str | None]:
        """The observation's ARIA fields: the snapshot of the page (or of ``scope``), shaped;
        and the whole masked tree (what session_parts keeps when it is longer than inline)."""
        try:
            # "ai" mode: iframes' content too, and each element's ref, which the selector
            # aria-ref=REF reaches (lasting_refs makes it a lasting one in the steps kept).
            tree = self._ctx.mask(
                await aria_snapshot(page, timeout_ms=OBSERVE_TIMEOUT_MS, scope=view.scope)
            )
        except (PlaywrightError, TimeoutError) as exc:
            problem = first_line(str(getattr(exc, "message", None) or exc))
            if view.scope:
                problem = f"scope {view.scope!r} matched nothing in time: {problem}"
            return {"aria_error": problem}, None
        key = view.scope or ""
        shaped = shape(tree, self._last_aria.get(key), max_chars=view.max_chars, diff=view.diff)
        self._last_aria[key] = tree
        fields = {
            "aria_snapshot": shaped.text,
            "aria_truncated": shaped.truncated,
            "aria_diff": shaped.diff if view.diff else None,
            "aria_chars": shaped.chars,
        }
        # A diff is the agent's own budget: the whole tree is kept apart only for a full one.
        return fields, None if shaped.diff else tree


async def lasting_refs(step: Step, page: Any) -> Step:
    """``step`` with an ``aria-ref=REF`` selector (a ref of the last observation) made the
    lasting selector of the element it names (role and name, test id...): the step runs on
    that element, and is kept so, for a saved workflow to find it again in a later run."""
    selector = getattr(step, "selector", None)
    if not (isinstance(selector, str) and selector.startswith(ARIA_REF)):
        return step
    try:
        normalized = await asyncio.wait_for(
            page.locator(selector).normalize(), OBSERVE_TIMEOUT_MS / 1000
        )
    except (PlaywrightError, TimeoutError) as exc:
        raise FailJob(
            f"{selector} is not in the page's last observation "
            f"({first_line(str(getattr(exc, 'message', None) or exc))}): observe again and "
            "use a ref from it",
            kind="step_failed",
        ) from None
    # The driver's resolved selector (Python has no locator generator of its own).
    resolved = normalized._impl_obj._selector
    kept = step.model_dump(mode="json", exclude_unset=True, exclude_none=True)
    kept.pop("frame", None)  # a ref is the page's: its lasting selector enters the frames
    return STEP_ADAPTER.validate_python({**kept, "selector": resolved})


async def _tabs(page: Any, mask: Callable[[str], str]) -> list[dict[str, Any]]:
    """The context's pages when a popup or a new tab opened beside the session's own."""
    pages = [p for p in page.context.pages if not p.is_closed()]
    if len(pages) < 2:
        return []
    out = []
    for index, other in enumerate(pages):
        title = ""
        with contextlib.suppress(PlaywrightError, TimeoutError):
            title = await other.title()
        tab = {"index": index, "url": mask(other.url), "title": mask(title)}
        out.append({**tab, "current": True} if other is page else tab)
    return out


TITLE_RETRY_S = 0.05


async def _title(page: Any) -> str | None:
    """The page's title. A step may have started a navigation it did not wait for (a click
    that submits a form): the title is read once the new document is in (the snapshot and
    screenshot that follow then see it too)."""
    # A document just committed has no <title> parsed yet (its title reads ""): wait for its
    # DOMContentLoaded (not at all for a page already loaded).
    if not dom_ready(page):
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await page.wait_for_load_state("domcontentloaded", timeout=OBSERVE_TIMEOUT_MS)
    deadline = time.monotonic() + OBSERVE_TIMEOUT_MS / 1000
    while True:
        with contextlib.suppress(PlaywrightError, TimeoutError):
            return str(await page.title())
        if time.monotonic() > deadline:
            return None
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await page.wait_for_load_state("domcontentloaded", timeout=OBSERVE_TIMEOUT_MS)
        await asyncio.sleep(TITLE_RETRY_S)  # the new document's context may not be made yet


def dom_ready(page: Any) -> bool:
    """Whether the page's document has fired DOMContentLoaded, read from the load states
    Playwright's client keeps for its main frame (from the driver's events, in order).
    ``wait_for_load_state`` answers from the same set, but sends the driver three messages
    first (its waiter's log), which a session's every step paid (~1 ms here, measured).
    Playwright keeps the set privately: where it is not found, False (the wait runs)."""
    frame = getattr(page.main_frame, "_impl_obj", None)
    states = getattr(frame, "_load_states", None)
    return isinstance(states, set) and "domcontentloaded" in states
