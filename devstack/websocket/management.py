"""The WebSocket stage's ``@connections`` management endpoint, as ``apigatewaymanagementapi``
calls it: ``POST`` (send), ``DELETE`` (close), ``GET`` (describe) ``/<stage>/@connections/<id>``.

An app of the local gateway's HTTP server (``devstack.gateway.LocalGateway``), served on its
own loopback port; its URL is the live function's and stream reader's ``live_endpoint``.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urlsplit

from devstack.gateway.events import HttpRequest, HttpResponse
from devstack.websocket.server import Gone, LocalWebSocketApi

MAX_POST_BYTES = 128 * 1024


def _error(status: int, code: str, message: str) -> HttpResponse:
    return HttpResponse(
        status,
        [("Content-Type", "application/json"), ("x-amzn-ErrorType", code)],
        json.dumps({"message": message}).encode(),
    )


class ConnectionsApp:
    def __init__(self, api: LocalWebSocketApi) -> None:
        self.api = api
        self._path = re.compile(rf"^/{re.escape(api.stage)}/@connections/(?P<id>[^/]+)$")

    def _match(self, request: HttpRequest) -> re.Match[str] | None:
        # The raw path: an id is base64 and may hold "/" (sent as %2F).
        return self._path.match(urlsplit(request.raw_path).path)

    def matches(self, request: HttpRequest) -> bool:
        return self._match(request) is not None

    def handle(self, request: HttpRequest) -> HttpResponse:
        found = self._match(request)
        assert found is not None
        connection_id = unquote(found.group("id"))
        try:
            if request.method == "POST":
                if len(request.body) > MAX_POST_BYTES:
                    return _error(413, "PayloadTooLargeException", "Message too long")
                self.api.post(connection_id, request.body)
                return HttpResponse(200, [("Content-Type", "application/json")], b"{}")
            if request.method == "DELETE":
                self.api.close(connection_id)
                return HttpResponse(204)
            if request.method == "GET":
                body = json.dumps(self.api.describe(connection_id)).encode()
                return HttpResponse(200, [("Content-Type", "application/json")], body)
        except Gone:
            return _error(410, "GoneException", f"connection {connection_id} is gone")
        return _error(405, "MethodNotAllowed", f"{request.method} is not allowed here")
