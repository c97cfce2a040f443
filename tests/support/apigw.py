"""API Gateway REST (v1, Lambda proxy) events for tests, built by the local gateway's own
event builder (``devstack.gateway``), so tests and the local stack cannot disagree."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

from devstack.gateway import (
    STAGE_NAME,
    HttpRequest,
    method_arn,
    proxy_resource,
    strip_stage,
    token_authorizer_event,
)
from devstack.gateway import rest_event as gateway_rest_event

API_ID = "abcdef1234"
STAGE = STAGE_NAME  # the URL is https://<api>/v1/...: the stage is the version
HOST = "api.example.test"
REQUEST_TIME_MS = 1796018400000  # 30/Nov/2026:06:00:00 +0000: events are reproducible

# Quoting that ``HttpRequest.path`` (which unquotes) turns back into exactly the given path.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def http_request(
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    raw_body: bytes | None = None,
) -> HttpRequest:
    """The HTTP request a client sends: JSON ``body`` (a str is sent as is) or exact
    ``raw_body`` bytes; ``Content-Type: application/json`` unless ``headers`` say otherwise."""
    hdrs = {"Content-Type": "application/json", "Host": HOST, **(headers or {})}
    if raw_body is not None:
        data = raw_body
    elif body is None:
        data = b""
    else:
        text = body if isinstance(body, str) else json.dumps(body)
        data = text.encode("utf-8", "surrogatepass")
    raw_path = quote(path, safe=_PATH_SAFE) + (f"?{query}" if query else "")
    return HttpRequest(
        method=method,
        raw_path=raw_path,
        headers=list(hdrs.items()),
        body=data,
        source_ip="127.0.0.1",
    )


def rest_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    authorizer: dict[str, str] | None = None,
    raw_body: bytes | None = None,
) -> dict[str, Any]:
    """``path`` is the URL's (``/v1/jobs``): the event's path is without the stage, as API
    Gateway sends it. ``raw_body`` sends exact bytes (base64-encoded when they are not
    UTF-8, as API Gateway does), for the tests of bodies no JSON encoder would produce."""
    request = http_request(method, path, body=body, headers=headers, query=query, raw_body=raw_body)
    request = strip_stage(request, STAGE) or request
    resource, params = proxy_resource(request.path)
    return gateway_rest_event(
        request,
        resource=resource,
        path_parameters=params,
        authorizer=authorizer,
        api_id=API_ID,
        stage=STAGE,
        request_id=str(uuid.uuid4()),
        now_ms=REQUEST_TIME_MS,
    )


def token_event(token: str | None, method: str = "GET", path: str = "/v1/jobs") -> dict[str, Any]:
    return token_authorizer_event(token, method_arn(API_ID, STAGE, method, path))
