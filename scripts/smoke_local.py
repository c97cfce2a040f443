"""The smoke run's local pieces: an embedded AWS in a child process, and a page to visit."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from smoke_specs import SmokeFailed

REPO_ROOT = Path(__file__).resolve().parents[1]

PAGE = b"""<!doctype html><html><head><title>smoke</title></head>
<body><h1>pagefleet smoke</h1><p class="price">42</p></body></html>"""


@contextlib.contextmanager
def embedded_aws(log: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    import httpx

    from devstack.loopback import reserve_loopback_port

    # Held until moto has it: a port only chosen could be taken by another connection first.
    with reserve_loopback_port() as held, log.open("wb") as out:
        port = held.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "devstack.embedded_aws", "--fd", str(held.fileno())],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_PROXY": "*", "MOTO_PORT": str(port), **(extra_env or {})},
            pass_fds=(held.fileno(),),
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(trust_env=False, timeout=2) as http:
            while True:
                if proc.poll() is not None:
                    raise SmokeFailed(f"embedded AWS exited:\n{log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{endpoint}/moto-api/").status_code < 500:
                        break
                if time.monotonic() > deadline:
                    raise SmokeFailed("embedded AWS did not start")
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def test_page() -> Iterator[str]:
    from devstack.loopback import serve_on_loopback

    server = serve_on_loopback(_Page, "smoke-page")
    try:
        yield f"{server.url}/"
    finally:
        server.stop()
