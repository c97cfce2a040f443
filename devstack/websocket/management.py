"""The WebSocket stage's ``@connections`` management endpoint, as ``apigatewaymanagementapi``
calls it: ``POST`` (send), ``DELETE`` (close), ``GET`` (describe) ``/<stage>/@connections/<id>``.

An app of the local gateway's HTTP server (``devstack.gateway.LocalGateway``), served on its
own loopback port; its URL is the live function's and stream reader's ``live_endpoint``.
With a ``Checker`` (the local stack's IAM) each call needs ``execute-api:ManageConnections``
on ``arn:aws:execute-api:<region>:<account>:<api>/<stage>/<METHOD>/@connections/<id>`` in
its caller's policies, as on AWS.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urlsplit

from devstack.gateway.events import HttpRequest, HttpResponse
from devstack.iam.book import LOCAL_WEBSOCKET_API
from devstack.iam.calls import Wire, credential
from devstack.iam.guard import Checker, Denial
from devstack.iam.policy import Request
from devstack.websocket.server import Gone, LocalWebSocketApi

MAX_POST_BYTES = 128 * 1024


def _error(status: int, code: str, message: str) -> HttpResponse:
    return HttpResponse(
        status,
        [("Content-Type", "application/json"), ("x-amzn-ErrorType", code)],
        json.dumps({"message": message}).encode(),
    )


class ConnectionsApp:
    def __init__(self, api: LocalWebSocketApi, checker: Checker | None = None) -> None:
        self.api = api
        self._checker = checker
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
        refused = self._refused(request, connection_id)
        if refused is not None:
            return refused
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

    def _refused(self, request: HttpRequest, connection_id: str) -> HttpResponse | None:
        checker = self._checker
        if checker is None:
            return None
        wire = Wire(
            request.method,
            request.path,
            request.query,
            {k.lower(): v for k, v in request.headers},
            b"",
        )
        found = credential(wire)
        key = found[0] if found else ""
        if checker.is_operator(key):
            checker.count_operator()
            return None
        account = checker.book.account
        resource = account.arn(
            "execute-api",
            f"{LOCAL_WEBSOCKET_API}/{self.api.stage}/{request.method}/@connections/{connection_id}",
        )
        caller = checker.caller(key)
        asked = Request("execute-api:ManageConnections", resource)
        denial = (
            checker.check(caller, [asked])
            if caller is not None
            else Denial(key or "anonymous", asked.action, resource, "unknown access key")
        )
        checker.record(caller.name if caller else f"unknown key {key}", denial, 0.0)
        if denial is None:
            return None
        who = caller.session_arn if caller else key
        return _error(403, "AccessDeniedException", denial.message(who))
