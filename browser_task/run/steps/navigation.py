"""goto, wait_for, sleep, back, forward and switch_tab."""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from browser_task.egress.guard import ALLOWED_SCHEMES
from browser_task.egress.http import (
    KIND_HEADER,
    REFUSAL_HEADER,
)
from browser_task.errors import FailJob, egress_failure, refused_navigation, target_unavailable
from browser_task.run.context import RunContext
from browser_task.run.url_patterns import glob_matcher
from pagefleet.workflow import Back, Forward, Goto, Sleep, SwitchTab, WaitFor


async def goto(step: Goto, ctx: RunContext) -> None:
    scheme = urlsplit(step.url).scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise FailJob(
            f"goto only opens http and https URLs, not {scheme or 'a URL without a scheme'!r}",
            kind="invalid_workflow",
        )
    verdict = await ctx.guard.check(step.url)
    if not verdict.allowed:
        raise refused_navigation(step.url, verdict.reason or "refused by the egress policy")
    response = await ctx.page.goto(
        step.url, wait_until=step.wait_until, timeout=ctx.timeout_ms(step)
    )
    refusal = response.headers.get(REFUSAL_HEADER.lower()) if response is not None else None
    if response is not None and refusal is not None:
        # The page is the egress proxy's own answer: the target (or a redirect's) was refused
        # or could not be reached, directly or through the job's proxy.
        kind = response.headers.get(KIND_HEADER.lower())
        raise egress_failure(step.url, response.url, refusal, kind)
    if response is not None and (
        failure := target_unavailable(step.url, response.status, response.url)
    ):
        raise failure


async def wait_for(step: WaitFor, ctx: RunContext) -> None:
    timeout = ctx.timeout_ms(step)
    if step.selector is not None:
        locator = ctx.scope(step.frame).locator(step.selector).first
        await locator.wait_for(state=step.state, timeout=timeout)
    elif step.url is not None:
        matches = glob_matcher(step.url, ctx.url_budget)
        ctx.url_budget.raise_overrun()  # a glob Playwright would refuse: no wait for it
        await ctx.page.wait_for_url(matches, timeout=timeout)
    elif step.load_state is not None:
        # "commit" (response received) is not a load state Playwright waits for; the nearest is
        # domcontentloaded, reached right after it.
        state = "domcontentloaded" if step.load_state == "commit" else step.load_state
        await ctx.page.wait_for_load_state(state, timeout=timeout)


async def sleep(step: Sleep, ctx: RunContext) -> None:
    # Bounded by the model (MAX_SLEEP_MS) and, like every step, by the job watchdog.
    await asyncio.sleep(step.ms / 1000)


async def back(step: Back, ctx: RunContext) -> None:
    await _history(ctx, step, forward=False)


async def forward(step: Forward, ctx: RunContext) -> None:
    await _history(ctx, step, forward=True)


async def _history(ctx: RunContext, step: Back | Forward, *, forward: bool) -> None:
    page = ctx.page
    before = page.url
    move = page.go_forward if forward else page.go_back
    response = await move(wait_until=step.wait_until, timeout=ctx.timeout_ms(step))
    # No response: nothing to go to, or a move within the document (a #hash, pushState),
    # which changes the URL; an unchanged URL means the history had no such page.
    if response is None and page.url == before:
        where = "forward to (no back came before)" if forward else "back to"
        raise FailJob(f"the tab has no page to go {where}", kind="step_failed")


# How often switch_tab looks for the tab it waits for (a popup opens on its own time).
TAB_POLL_S = 0.05


async def switch_tab(step: SwitchTab, ctx: RunContext) -> None:
    """Later steps act on the tab named; the dialogs it opens are answered as the first
    tab's are."""
    deadline = time.monotonic() + ctx.timeout_ms(step) / 1000
    while (page := _tab(ctx, step)) is None:
        if time.monotonic() >= deadline:
            tabs = ", ".join(f"{i}: {ctx.mask(p.url)}" for i, p in enumerate(_open(ctx)))
            wanted = (
                f"index {step.index}"
                if step.index is not None
                else f"a URL with {step.url_contains!r}"
            )
            raise FailJob(
                f"no tab with {wanted} opened within {ctx.timeout_ms(step)} ms (tabs: {tabs})",
                kind="step_failed",
            )
        await asyncio.sleep(TAB_POLL_S)
    with contextlib.suppress(PlaywrightError):
        await page.bring_to_front()
    ctx.page = page


def _open(ctx: RunContext) -> list[Page]:
    return [p for p in ctx.session.context.pages if not p.is_closed()]


def _tab(ctx: RunContext, step: SwitchTab) -> Page | None:
    tabs = _open(ctx)
    if step.index is not None:
        return tabs[step.index] if -len(tabs) <= step.index < len(tabs) else None
    assert step.url_contains is not None
    return next((p for p in tabs if step.url_contains in p.url), None)
