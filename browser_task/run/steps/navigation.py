"""goto, wait_for and sleep."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from browser_task.egress.guard import ALLOWED_SCHEMES
from browser_task.egress.http import (
    KIND_HEADER,
    REFUSAL_HEADER,
)
from browser_task.errors import FailJob, egress_failure, refused_navigation, target_unavailable
from browser_task.run.context import RunContext
from pagefleet.workflow import Goto, Sleep, WaitFor


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
        await ctx.page.wait_for_url(step.url, timeout=timeout)
    elif step.load_state is not None:
        # "commit" (response received) is not a load state Playwright waits for; the nearest is
        # domcontentloaded, reached right after it.
        state = "domcontentloaded" if step.load_state == "commit" else step.load_state
        await ctx.page.wait_for_load_state(state, timeout=timeout)


async def sleep(step: Sleep, ctx: RunContext) -> None:
    # Bounded by the model (MAX_SLEEP_MS) and, like every step, by the job watchdog.
    await asyncio.sleep(step.ms / 1000)
