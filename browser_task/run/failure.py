"""What a failed attempt keeps of its page: ``failure.png`` and ``failure.html`` (debug
retention), and its trace.

The picture is the compositor's (``page_view.compositor_picture``), which never waits;
Playwright's screenshot, which waits for the page's fonts, is the fallback when the browser
gives none, and is not tried while a navigation is in flight (its fonts never settle
then). The HTML is ``page.content()`` as the step failed, except while the main frame
waits for a navigation's answer (``page_view.NavigationWatch``): ``content()`` would wait
for that answer, so the document still shown is read from Chromium's snapshot instead,
and says so in a comment at its top. A job stopped by its ``job_timeout_s`` on a page that
never answers thus gives its slot back within milliseconds of the stop, with both files.
Nothing is read eagerly: a job that succeeds pays nothing for this.
"""

from __future__ import annotations

import asyncio
import contextlib

from playwright.async_api import CDPSession
from playwright.async_api import Error as PlaywrightError

from browser_task.browser.page_view import (
    compositor_picture,
    devtools,
    snapshot_html,
)
from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from pagefleet.specs.resources import DEBUG

FAILURE_SCREENSHOT = "failure.png"
FAILURE_HTML = "failure.html"
FAILURE_SCREENSHOT_TIMEOUT_MS = 3_000


async def keep_page_before(ctx: RunContext) -> None:
    """The page's HTML as an irreversible step is about to act (bounded, best effort): the
    failure's HTML when nothing else can be read at the end."""
    with contextlib.suppress(PlaywrightError, TimeoutError):
        ctx.html_before_irreversible = await asyncio.wait_for(ctx.page.content(), 1.0)


async def capture_failure_artifacts(ctx: RunContext) -> None:
    """Best effort, bounded: the page as it was when the job failed, and the trace.

    Nothing here may replace the real failure with another one.
    """
    session = ctx.session
    alive = not (session.closed or session.crashed or session.page.is_closed())
    want_shot = alive and FAILURE_SCREENSHOT not in ctx.artifacts.names
    want_html = alive and FAILURE_HTML not in ctx.artifacts.names
    if want_shot or want_html:
        # Read once, now: the step under way may still commit while this runs.
        pending = ctx.navigation.pending_url if ctx.navigation is not None else None
        cdp = await devtools(session.page)
        if want_shot:
            shot = await compositor_picture(cdp) if cdp is not None else None
            if shot is None and pending is None:
                with contextlib.suppress(PlaywrightError, TimeoutError):
                    shot = await asyncio.wait_for(
                        session.page.screenshot(type="png", timeout=FAILURE_SCREENSHOT_TIMEOUT_MS),
                        FAILURE_SCREENSHOT_TIMEOUT_MS / 1000 + 0.5,
                    )
            if shot is not None:
                with contextlib.suppress(FailJob):
                    ctx.artifacts.add(FAILURE_SCREENSHOT, shot, "image/png", retention=DEBUG)
        if want_html:
            html = await _page_html(ctx, pending, cdp)
            if html is not None:
                with contextlib.suppress(FailJob):
                    ctx.artifacts.add(
                        FAILURE_HTML,
                        ctx.mask(html).encode(),
                        "text/html; charset=utf-8",
                        retention=DEBUG,
                    )
    if ctx.trace is not None and not session.closed and not session.crashed:
        await ctx.trace.finish(ctx.artifacts, failed=True, secrets=bool(ctx.masker))


async def _page_html(ctx: RunContext, pending: str | None, cdp: CDPSession | None) -> str | None:
    """The failure's HTML (unmasked): see the module's docstring for which and why."""
    if pending is None:
        with contextlib.suppress(PlaywrightError, TimeoutError):
            return await asyncio.wait_for(ctx.page.content(), FAILURE_SCREENSHOT_TIMEOUT_MS / 1000)
    # A navigation in flight (or one the watch did not see, which content() waited for).
    shown = await snapshot_html(cdp) if cdp is not None else None
    if shown is not None:
        return _marked(shown, pending)
    # No snapshot either: the page as its irreversible step was about to act (a posted
    # form still waiting for its answer), what a reviewer needs; else nothing.
    return ctx.html_before_irreversible


def _marked(html: str, pending: str | None) -> str:
    """Say, in the file, that this is the document still shown, serialized by Chromium."""
    why = (
        # A URL escapes ">", so it cannot end the comment; "-->" is refused all the same.
        f"while a navigation to {pending.replace('-->', '--&gt;')} had not committed"
        if pending is not None
        else "without waiting for the page"
    )
    note = (
        f"<!-- pagefleet: the document still shown when the job failed, read {why}; "
        "serialized by Chromium's snapshot (scripts left out, links made absolute) -->\n"
    )
    return note + html
