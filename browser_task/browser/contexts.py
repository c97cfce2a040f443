"""A job's browser context, opened with the job's options, and its page.

What each option becomes in Playwright's ``new_context``, and the order of a context's
setups and its page (browser_task.browser.setup: routes first, the rest beside the page).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from playwright.async_api import BrowserContext, Page

from browser_task.browser.generation import CONTEXT_CLOSE_TIMEOUT_S, BrowserGeneration
from browser_task.browser.setup import ContextSetup, RoutesFirst
from browser_task.browser.warm import RecordingContext
from browser_task.egress.proxy import EgressProxy
from pagefleet.jobs.options import JobOptions


async def open_context(
    generation: BrowserGeneration,
    options: JobOptions,
    storage_state: dict[str, Any] | None = None,
    setup: ContextSetup | None = None,
    egress: EgressProxy | None = None,
    listeners: list[tuple[str, Callable[..., Any]]] | None = None,
    video_dir: str | None = None,
    har_path: str | None = None,
) -> tuple[BrowserContext, Page]:
    """A new context with the job's options, and its page, with ``setup`` applied before the
    page's first request; a context whose page could not be made is closed."""
    viewport = {"width": options.viewport.width, "height": options.viewport.height}
    context = await generation.browser.new_context(
        viewport=viewport,  # type: ignore[arg-type]
        # A job with its own proxy talks to its own egress listener, which checks every
        # target like the worker's and chains to that proxy (Playwright keeps loopback
        # proxied for a context proxy, so nothing goes around the listener).
        proxy={"server": egress.url} if egress is not None else None,
        # Per-job identity.
        user_agent=options.user_agent,
        locale=options.locale,
        timezone_id=options.timezone_id,
        extra_http_headers=options.extra_headers or None,
        # A saved login (the workflow's leading use_session steps).
        storage_state=storage_state,  # type: ignore[arg-type]
        accept_downloads=True,
        # Service workers fetch on their own, outside the page; they would still go
        # through the proxy, but blocking them keeps every request attributable.
        service_workers="block",
        # options.video: the page recorded at the viewport's size (browser_task.browser.video).
        record_video_dir=video_dir,
        record_video_size=viewport if video_dir is not None else None,  # type: ignore[arg-type]
        # options.har: the traffic, bodies as files in the zip, written as it closes
        # (browser_task.browser.har redacts it before it is kept).
        record_har_path=har_path,
        record_har_content="attach" if har_path is not None else None,
    )
    try:
        context.set_default_timeout(options.action_timeout_ms)
        context.set_default_navigation_timeout(options.navigation_timeout_ms)
        if setup is None:
            page = await context.new_page()
        else:
            # Both are round trips to the browser; neither needs the other. What setup
            # registers is noted, so a warm context can drop it before the next job.
            recording = RecordingContext(context, listeners if listeners is not None else [])
            if isinstance(setup, RoutesFirst):  # browser_task.browser.setup says why
                await setup(recording)  # type: ignore[arg-type]
                page = await context.new_page()
            else:
                page, _ = await asyncio.gather(context.new_page(), setup(recording))  # type: ignore[arg-type]
    except BaseException:
        with contextlib.suppress(Exception):
            await generation.within(context.close(), CONTEXT_CLOSE_TIMEOUT_S)
        raise
    return context, page
