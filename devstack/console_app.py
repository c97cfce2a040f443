"""The web console on the local gateway: ``console/`` served at ``<API URL>/console/``.

CloudFront serves the same files on AWS, next to the API under one origin; here the gateway
does, so the console calls ``/v1/...`` on its own origin in both places. ``config.json`` is
made from the running stack (the live WebSocket URL), and every answer carries the headers
CloudFront's response headers policy adds.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Callable
from pathlib import Path

from devstack.gateway.events import HttpRequest, HttpResponse, gateway_error
from pagefleet.specs.console_site import (
    CONFIG_FILE,
    CONSOLE_DIR,
    CONSOLE_PATH,
    SECURITY_HEADERS,
    SiteConfig,
    content_security_policy,
)
from pagefleet.specs.resources import API_STAGE

REPO_ROOT = Path(__file__).resolve().parents[1]
_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


class ConsoleApp:
    """Static files under ``/console/`` (GET and HEAD), the generated config, and the
    console's security headers."""

    def __init__(
        self,
        config: Callable[[], SiteConfig],
        *,
        image_origins: tuple[str, ...] = (),
        connect_origins: tuple[str, ...] = (),
        root: Path | None = None,
    ) -> None:
        self.config = config
        self.root = (root or REPO_ROOT / CONSOLE_DIR).resolve()
        self.policy = content_security_policy(
            image_origins=image_origins, connect_origins=connect_origins
        )

    def matches(self, request: HttpRequest) -> bool:
        path = request.path
        if path == "/":  # a browser at the root is led to the console, as on CloudFront
            return request.method in ("GET", "HEAD")
        return path == CONSOLE_PATH.rstrip("/") or path.startswith(CONSOLE_PATH)

    def handle(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return self._with_headers(gateway_error(405, "Method Not Allowed"))
        name = request.path[len(CONSOLE_PATH) :]
        if request.path in ("/", CONSOLE_PATH.rstrip("/")):
            return self._with_headers(HttpResponse(301, [("Location", CONSOLE_PATH)]))
        if name == CONFIG_FILE:
            body = json.dumps(self.config().as_json()).encode()
            return self._file(body, "application/json")
        found = self._resolve(name or "index.html")
        if found is None:
            return self._with_headers(gateway_error(404, "Not Found"))
        kind = _TYPES.get(found.suffix) or mimetypes.guess_type(found.name)[0]
        return self._file(found.read_bytes(), kind or "application/octet-stream")

    def _resolve(self, name: str) -> Path | None:
        """The file for ``name``, never outside the console's directory."""
        candidate = (self.root / name).resolve()
        if not candidate.is_relative_to(self.root) or not candidate.is_file():
            return None
        return candidate

    def _file(self, body: bytes, content_type: str) -> HttpResponse:
        # no-cache: a console edited while the stack runs shows the edit on reload.
        headers = [("Content-Type", content_type), ("Cache-Control", "no-cache")]
        return self._with_headers(HttpResponse(200, headers, body))

    def _with_headers(self, response: HttpResponse) -> HttpResponse:
        headers = [*response.headers, ("Content-Security-Policy", self.policy)]
        headers += list(SECURITY_HEADERS.items())
        return HttpResponse(response.status, headers, response.body)


def local_console(live_url: str, aws_endpoint: str) -> ConsoleApp:
    """The console of a local stack: its live WebSocket API, artifacts from the embedded AWS."""
    config = SiteConfig(api_base=f"/{API_STAGE}", websocket_url=live_url, stage="local")
    return ConsoleApp(
        lambda: config,
        image_origins=(aws_endpoint,),  # presigned artifact URLs
        connect_origins=(live_url.rsplit("/", 1)[0],),  # ws://127.0.0.1:<port>
    )
