"""A session's answer reads the page's title once its document is parsed, and a page already
loaded is read at once (browser_task.run.observation)."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler

from playwright.async_api import async_playwright

from browser_task.run.observation import _title, dom_ready
from devstack.console_browser import chromium_launch_options
from devstack.loopback import serve_on_loopback

# The page's head names it "Loading"; a script at the end of its body, sent only once the
# test lets it, renames it as the document finishes parsing.
HEAD = b"<!doctype html><html><head><title>Loading</title></head><body><p>part one</p>"
TAIL = b"<script>document.title = 'Ready'</script></body></html>"


def _held_page(release: threading.Event) -> type[BaseHTTPRequestHandler]:
    class Held(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(HEAD) + len(TAIL)))
            self.end_headers()
            self.wfile.write(HEAD)
            self.wfile.flush()
            release.wait(10)
            self.wfile.write(TAIL)

        def log_message(self, *_args: object) -> None:
            pass

    return Held


def test_the_title_waits_for_a_committed_document_and_not_for_a_loaded_one() -> None:
    release = threading.Event()
    server = serve_on_loopback(_held_page(release), "held-page")

    async def scenario() -> tuple[bool, bool, str | None, bool, str | None]:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(**chromium_launch_options())  # type: ignore[arg-type]
            try:
                page = await browser.new_page()
                await page.goto(server.url, wait_until="commit")
                parsing = dom_ready(page)
                reading = asyncio.ensure_future(_title(page))
                await asyncio.sleep(0.3)
                waited = not reading.done()  # read before the rest arrived, it says "Loading"
                release.set()
                title = await reading
                again = await _title(page)
                return parsing, waited, title, dom_ready(page), again
            finally:
                await browser.close()

    try:
        parsing, waited, title, ready, again = asyncio.run(scenario())
    finally:
        release.set()
        server.stop()
    assert parsing is False and waited
    assert title == "Ready"
    # Read from Playwright's own load states: a Playwright that keeps them elsewhere fails
    # here (the title would still be right, each step ~1 ms slower).
    assert ready is True
    assert again == "Ready"
