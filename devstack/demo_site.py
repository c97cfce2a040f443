"""The demo website the example workflows run against, served on loopback only.

Static pages from ``examples/site`` plus two handlers: ``POST /contact`` answers with a
confirmation page that echoes the submitted name (HTML-escaped), and the watched shop
(``/watch/``, ``devstack.demo_watch``) whose prices and stock a test or a user changes
between a monitor's runs.
"""

from __future__ import annotations

import html
import json
import zlib
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

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
        path = self.path.split("?", 1)[0]
        if path == PAGE_PATH:
            self._send(200, "text/html; charset=utf-8", self._shop.page())
        elif path == STATE_PATH:
            self._send(200, "application/json", json.dumps(self._shop.state()).encode())
        else:
            super().do_GET()

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
        if self.path.split("?", 1)[0] == RESET_PATH:
            self._shop.reset()
            self._send(200, "application/json", json.dumps(self._shop.state()).encode())
            return
        if self.path.split("?", 1)[0] != "/contact":
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_FORM_BYTES:
            self.send_error(413)
            return
        form = parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
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


class DemoSite(LoopbackServer):
    """The demo website on ``http://127.0.0.1:<port>`` (port 0 picks a free one)."""

    def __init__(self, port: int = 0, root: Path = SITE_DIR) -> None:
        handler = partial(_Handler, directory=str(root))
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.shop = WatchedShop()
        server.shop = self.shop  # type: ignore[attr-defined]
        super().__init__(server, "demo-site")
