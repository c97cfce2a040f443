"""The demo website the example workflows run against, served on loopback only.

Static pages from ``examples/site`` plus handlers: ``POST /contact`` answers with a
confirmation page that echoes the submitted name (HTML-escaped), the shop's order desk
under ``/shop`` (``devstack.demo_orders``: orders recorded by reference, answers that can be
slow or dropped), the front page with a gallery of images (``/gallery``,
``devstack.demo_gallery``: as many requests as a real page) and the watched shop
(``/watch/``, ``devstack.demo_watch``) whose prices and stock a test or a user changes
between a monitor's runs.
"""

from __future__ import annotations

import contextlib
import html
import json
import zlib
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from devstack.demo_gallery import GALLERY_PATH, IMAGE_PREFIX, gallery_page, image, image_count
from devstack.demo_orders import Answer, Orders, handle_get, handle_post
from devstack.demo_watch import (
    MAX_STATE_BYTES,
    PAGE_PATH,
    RESET_PATH,
    STATE_PATH,
    WatchedShop,
)
from devstack.loopback import LoopbackServer

SITE_DIR = Path(__file__).resolve().parents[1] / "examples" / "site"
_MAX_FORM_BYTES = 64 * 1024

_CONFIRMATION = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Thank you</title><link rel="stylesheet" href="/style.css"></head>
<body>
  <header><h1>Thank you</h1><nav><a href="/">Products</a></nav></header>
  <main>
    <div class="confirmation" id="confirmation">
      <p>Thanks, <strong id="confirmed-name">{name}</strong>! We will answer
      <span id="confirmed-email">{email}</span> soon.</p>
      <p>Reference: <code id="reference">{reference}</code></p>
    </div>
  </main>
</body>
</html>
"""


class _Handler(SimpleHTTPRequestHandler):
    server_version = "pagefleet-demo/1"
    disable_nagle_algorithm = True  # no delayed-ACK stall between headers and body

    def __init__(self, *args: Any, orders: Orders, **kwargs: Any) -> None:
        self.orders = orders
        super().__init__(*args, **kwargs)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the stack prints enough
        return

    def end_headers(self) -> None:
        # Keep each page load cheap and deterministic for the benchmark and tests.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    @property
    def _shop(self) -> WatchedShop:
        shop: WatchedShop = self.server.shop  # type: ignore[attr-defined]
        return shop

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path.startswith("/shop/"):
            answer = handle_get(self.orders, parts.path, parse_qs(parts.query))
            if answer is not None:
                self._answer(answer)
                return
        if parts.path == GALLERY_PATH:
            self._gallery(parts.query)
        elif parts.path.startswith(IMAGE_PREFIX):
            found = image(parts.path)
            if found is None:
                self.send_error(404)
            else:
                self._send(200, "image/svg+xml", found)
        elif parts.path == PAGE_PATH:
            self._send(200, "text/html; charset=utf-8", self._shop.page())
        elif parts.path == STATE_PATH:
            self._send(200, "application/json", json.dumps(self._shop.state()).encode())
        else:
            super().do_GET()

    def _gallery(self, query: str) -> None:
        images = image_count(query)
        if images is None:
            self.send_error(400, "images: a count from 0 to 1000")
            return
        front_page = Path(self.directory) / "index.html"
        self._send(200, "text/html; charset=utf-8", gallery_page(front_page, images))

    def do_PUT(self) -> None:
        if self.path.split("?", 1)[0] != STATE_PATH:
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_STATE_BYTES:
            self.send_error(413)
            return
        problem = self._shop.replace(self.rfile.read(length))
        if problem is not None:
            self.send_error(400, problem)
            return
        self._send(200, "application/json", json.dumps(self._shop.state()).encode())

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path == RESET_PATH:
            self._shop.reset()
            self._send(200, "application/json", json.dumps(self._shop.state()).encode())
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_FORM_BYTES:
            self.send_error(413)
            return
        raw = self.rfile.read(length)
        if path.startswith("/shop/"):
            form = parse_qs(raw.decode("utf-8", "replace"))
            answer = handle_post(self.orders, path, form, raw)
            if answer is None:
                self.send_error(404)
            else:
                self._answer(answer)
            return
        if path != "/contact":
            self.send_error(404)
            return
        form = parse_qs(raw.decode("utf-8", "replace"))
        name = form.get("name", [""])[0].strip()
        email = form.get("email", [""])[0].strip()
        if not name or not email:
            self.send_error(400, "name and email are required")
            return
        reference = f"PF-{zlib.crc32(f'{name}|{email}'.encode()) % 1_000_000:06d}"
        body = _CONFIRMATION.format(
            name=html.escape(name), email=html.escape(email), reference=reference
        ).encode()
        self._send(200, "text/html; charset=utf-8", body)

    def _answer(self, answer: Answer) -> None:
        if answer.drop:
            # Recorded, never answered: the client sees its connection closed.
            self.close_connection = True
            return
        body = answer.body.encode()
        # A slow answer's client may have gone (its job timed out): that is expected here.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


class DemoSite(LoopbackServer):
    """The demo website on ``http://127.0.0.1:<port>`` (port 0 picks a free one); its
    ``orders`` are the shop's order desk (what was ordered, how it answers)."""

    def __init__(self, port: int = 0, root: Path = SITE_DIR) -> None:
        self.orders = Orders()
        handler = partial(_Handler, directory=str(root), orders=self.orders)
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.shop = WatchedShop()
        server.shop = self.shop  # type: ignore[attr-defined]
        super().__init__(server, "demo-site")

    def stop(self) -> None:
        self.orders.stop()
        super().stop()
