"""goto, wait_for and sleep."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from browser_task.context import RunContext
from browser_task.egress import ALLOWED_SCHEMES, UNRESOLVED_PREFIX
from browser_task.egress_http import (
    KIND_HEADER,
    POLICY,
    REFUSAL_HEADER,
    UNREACHABLE,
    UNRESOLVED,
    UPSTREAM_AUTH,
)
from browser_task.errors import FailJob, JobFailure, RetryJob
from pagefleet.breaker import origin_of
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
        reason = verdict.reason or "refused by the egress policy"
        if reason.startswith(UNRESOLVED_PREFIX):
            raise RetryJob(
                f"navigation to {step.url} failed: {reason}",
                kind="navigation_failed",
                origin=origin_of(step.url),
            )
        raise FailJob(f"navigation to {step.url} refused: {reason}", kind="egress_refused")
    response = await ctx.page.goto(
        step.url, wait_until=step.wait_until, timeout=ctx.timeout_ms(step)
    )
    refusal = response.headers.get(REFUSAL_HEADER.lower()) if response is not None else None
    if response is not None and refusal is not None:
        # The page is the egress proxy's own answer: the target (or a redirect's) was refused
        # or could not be reached, directly or through the job's proxy.
        kind = response.headers.get(KIND_HEADER.lower())
        raise egress_failure(step.url, response.url, refusal, kind)
    if response is not None and (response.status >= 500 or response.status == 429):
        raise RetryJob(
            f"{step.url} answered HTTP {response.status}",
            kind="target_unavailable",
            origin=origin_of(response.url),  # after redirects: the origin that answered so
        )


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


def egress_failure(url: str, ended_at: str, reason: str, kind: str | None) -> JobFailure:
    """What the egress proxy's refusal of a navigation means for the job."""
    where = url if ended_at in ("", url) else f"{url} (redirected to {ended_at})"
    if kind == UNREACHABLE:
        return RetryJob(
            f"navigation to {where} failed: {reason}",
            kind="navigation_failed",
            origin=_failed_origin(url, ended_at),
        )
    if kind == UNRESOLVED:  # not the site's failure: the circuit breakers do not count it
        return RetryJob(f"navigation to {where} failed: {reason}", kind="host_unresolved")
    if kind == UPSTREAM_AUTH:
        return FailJob(
            f"navigation to {where} failed: {reason}; check options.proxy username and password",
            kind="proxy_auth_failed",
        )
    if kind not in (None, POLICY):
        # The job's own upstream proxy said no (or failed): it may well answer next time.
        return RetryJob(f"navigation to {where} failed: {reason}", kind="proxy_failed")
    return FailJob(
        f"navigation to {where} was refused by the egress filter: {reason}",
        kind="egress_refused",
    )


def _failed_origin(url: str, ended_at: str) -> str | None:
    """The origin that could not be reached: where the navigation ended (a URL, or the
    ``host:port`` of a refused tunnel), else the URL asked for."""
    if ended_at in ("", url):
        return origin_of(url)
    if "://" in ended_at:
        return origin_of(ended_at)
    return origin_of(f"{urlsplit(url).scheme}://{ended_at}/")
