"""The page as Chromium shows it, read without waiting on the page.

While the main frame waits for a navigation's answer (a site that takes the connection and
never answers), Chromium's DevTools defers every command that runs in the page's renderer
(``Runtime.evaluate``, ``DOM.*``) until the navigation commits, and Playwright's
``page.content()`` and ``page.screenshot()`` (which waits for the page's fonts) wait with
them, each until its timeout. Two DevTools commands are answered by the browser process
and do not wait: ``Page.captureScreenshot`` (the compositor's picture of the viewport) and
``Page.captureSnapshot`` (an MHTML archive of the document still shown, serialized by the
renderer outside the DevTools session). ``NavigationWatch`` tells when the main frame has
such a navigation in flight, from events the worker receives anyway.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email
import re
from collections.abc import Callable
from email.message import Message
from typing import Any

from playwright.async_api import CDPSession, Frame, Page, Request
from playwright.async_api import Error as PlaywrightError

from browser_task.observe.request_events import on_request

# How long one DevTools command may take: answered in milliseconds by a browser that
# works; the bound is for one that no longer answers.
DEVTOOLS_TIMEOUT_S = 2.0

# What Blink's serializer puts first in the head: the document's own encoding, replaced by
# the one the text is kept in.
_BLINK_CHARSET = re.compile(
    r'(<meta http-equiv="Content-Type" content="text/html; charset=)([^"]*)(">)', re.I
)


class NavigationWatch:
    """Whether the page's main frame has a navigation requested and not yet committed.

    Set by the navigation's request (the context's ``request`` event, which the worker's
    scheme guard already receives: no extra protocol traffic), cleared when the main frame
    commits a document (``framenavigated``, sent by Playwright to every client; a failed
    navigation commits Chromium's error page). A navigation that ends without a commit (a
    204, a download) leaves it set: the page is then read the way that does not wait, which
    gives the same document.
    """

    def __init__(self, page: Page) -> None:
        self._page = page
        self.pending_url: str | None = None

    @classmethod
    def listening(
        cls, page: Page, listeners: list[tuple[str, Callable[..., Any]]]
    ) -> NavigationWatch:
        """A watch already listening; its listeners are noted in ``listeners`` (a warm
        context outlives the job and drops them when parked)."""
        watch = cls(page)
        on_request(page.context, listeners, watch.on_request)
        page.on("framenavigated", watch.on_navigated)
        listeners.append(("page:framenavigated", watch.on_navigated))
        return watch

    def on_request(self, request: Request) -> None:
        if not request.is_navigation_request():
            return
        with contextlib.suppress(PlaywrightError):  # a frame not created yet: not ours
            if request.frame == self._page.main_frame:
                self.pending_url = request.url

    def on_navigated(self, frame: Frame) -> None:
        if frame == self._page.main_frame:
            self.pending_url = None


async def devtools(page: Page) -> CDPSession | None:
    """A DevTools session on ``page`` (None when the browser does not give one in time).

    Never detached by the caller: a detach waits behind a pending navigation. It goes with
    the context."""
    with contextlib.suppress(PlaywrightError, TimeoutError):
        return await asyncio.wait_for(page.context.new_cdp_session(page), DEVTOOLS_TIMEOUT_S)
    return None


async def compositor_picture(cdp: CDPSession) -> bytes | None:
    """The viewport as the compositor shows it, as PNG (None: no answer in time)."""
    with contextlib.suppress(PlaywrightError, TimeoutError, KeyError, ValueError):
        answer = await asyncio.wait_for(
            cdp.send("Page.captureScreenshot", {"format": "png"}), DEVTOOLS_TIMEOUT_S
        )
        return base64.b64decode(answer["data"], validate=True)
    return None


async def snapshot_html(cdp: CDPSession) -> str | None:
    """The HTML of the document shown (the main frame's), from Chromium's MHTML snapshot
    (None: no answer in time, or an archive without an HTML document)."""
    with contextlib.suppress(PlaywrightError, TimeoutError, KeyError):
        answer = await asyncio.wait_for(
            cdp.send("Page.captureSnapshot", {"format": "mhtml"}), DEVTOOLS_TIMEOUT_S
        )
        archive = answer["data"]
        return main_document(archive) if isinstance(archive, str) else None
    return None


def main_document(mhtml: str) -> str | None:
    """The first part of an MHTML archive (a MIME multipart/related message, read with the
    standard library's ``email``), which Blink makes the main frame's document, decoded.
    Blink's serialization is the live document like ``page.content()``, with
    scripts left out, links made absolute, iframes pointing at their parts (``cid:``) and a
    ``<meta http-equiv="Content-Type">`` first in the head, which is made to say UTF-8 (the
    text is kept as UTF-8).
    """
    archive = email.message_from_string(mhtml)
    if not archive.is_multipart():
        return None
    parts = archive.get_payload()
    first = parts[0] if isinstance(parts, list) and parts else None
    if not isinstance(first, Message) or first.get_content_type() != "text/html":
        return None
    raw = first.get_payload(decode=True)  # quoted-printable or base64, as the part says
    if not isinstance(raw, bytes):
        return None
    declared = _BLINK_CHARSET.search(raw[:2048].decode("ascii", errors="replace"))
    charset = declared.group(2) if declared is not None else "utf-8"
    try:
        text = raw.decode(charset, errors="replace")
    except LookupError:  # an encoding Python does not know: its ASCII still reads
        text = raw.decode("utf-8", errors="replace")
    return _BLINK_CHARSET.sub(r"\g<1>utf-8\g<3>", text, count=1)
