"""What API Gateway hands to Lambda and takes back, built from an HTTP request (pure).

The REST API is a ``LambdaRestApi(proxy=True)`` (infra/constructs/api.py): two resources,
``/`` and ``/{proxy+}``, each with ANY, proxied to one function whose Powertools resolver
owns the routes, and a resource for each public route (no key), with only its method.
``proxy_resource`` is that route table; there is no other.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
from pagefleet.specs.gateway import PUBLIC_ROUTES, gateway_body

# API Gateway refuses request payloads above 10 MB before any Lambda runs.
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024

ROOT_RESOURCE = "/"
PROXY_RESOURCE = "/{proxy+}"
# Resources of their own, with only their public method (infra/constructs/api.py).
PUBLIC_PATHS = frozenset(path for _, path in PUBLIC_ROUTES)


@dataclass(frozen=True)
class HttpRequest:
    method: str
    raw_path: str  # path plus query string, as received
    headers: Sequence[tuple[str, str]]  # in order, names as sent, repeats kept
    body: bytes
    source_ip: str = "127.0.0.1"

    @property
    def path(self) -> str:
        return unquote(urlsplit(self.raw_path).path) or "/"

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.raw_path).query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        value = None
        for key, val in self.headers:
            if key.lower() == name.lower():
                value = val
        return value


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @classmethod
    def json(cls, status: int, payload: Any, request_id: str | None = None) -> HttpResponse:
        headers = [("Content-Type", "application/json")]
        if request_id:
            headers.append(("x-amzn-RequestId", request_id))
        return cls(status, headers, json.dumps(payload).encode())


def gateway_error(status: int, message: str | None, request_id: str | None = None) -> HttpResponse:
    """An answer API Gateway writes itself (no Lambda involved), through the gateway
    response the stack configures for it: ``{"error": {"code", "message"}}``."""
    return HttpResponse.json(status, gateway_body(status, message), request_id)


def proxy_resource(path: str) -> tuple[str, dict[str, str]]:
    """The resource a path lands on, and its path parameters: ``/``, a public route's own
    resource (``/openapi.json``: more specific than the greedy one), or ``{proxy+}``."""
    if path == "/":
        return ROOT_RESOURCE, {}
    if path in PUBLIC_PATHS:
        return path, {}
    return PROXY_RESOURCE, {"proxy": path[1:]}


def method_arn(api_id: str, stage: str, method: str, path: str) -> str:
    return (
        f"arn:aws:execute-api:{LOCAL_REGION}:{LOCAL_ACCOUNT}:{api_id}/{stage}/{method}/"
        f"{path.lstrip('/')}"
    )


def token_authorizer_event(token: str | None, arn: str) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "TOKEN", "methodArn": arn}
    if token is not None:
        event["authorizationToken"] = token
    return event


def rest_event(
    request: HttpRequest,
    *,
    resource: str,
    path_parameters: Mapping[str, str],
    authorizer: Mapping[str, Any] | None,
    api_id: str,
    stage: str,
    request_id: str,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The API Gateway REST proxy-integration event for one request."""
    headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for name, value in request.headers:
        headers[name] = value
        multi_headers.setdefault(name, []).append(value)
    query = request.query
    body: str | None
    is_b64 = False
    if not request.body:
        body = None
    else:
        try:
            body = request.body.decode("utf-8")
        except UnicodeDecodeError:
            body, is_b64 = base64.b64encode(request.body).decode(), True
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return {
        "resource": resource,
        "path": request.path,
        "httpMethod": request.method,
        "headers": headers or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": dict(query) or None,
        "pathParameters": dict(path_parameters) or None,
        "stageVariables": None,
        "requestContext": {
            "resourceId": resource,
            "resourcePath": resource,
            "httpMethod": request.method,
            "path": f"/{stage}{request.path}",
            "stage": stage,
            "requestId": request_id,
            "extendedRequestId": request_id,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now_ms / 1000)),
            "requestTimeEpoch": now_ms,
            "protocol": "HTTP/1.1",
            "accountId": LOCAL_ACCOUNT,
            "apiId": api_id,
            "domainName": request.header("Host") or "127.0.0.1",
            "identity": {
                "sourceIp": request.source_ip,
                "userAgent": request.header("User-Agent"),
                "accessKey": None,
                "accountId": None,
                "caller": None,
                "user": None,
                "userArn": None,
            },
            "authorizer": dict(authorizer) if authorizer is not None else None,
        },
        "body": body,
        "isBase64Encoded": is_b64,
    }


def proxy_response(result: Any, request_id: str) -> HttpResponse:
    """Turn a Lambda proxy-integration result into HTTP, as API Gateway does. A result not
    in the proxy integration's output format (a status code, a body that is a string:
    base64 when ``isBase64Encoded``) is API Gateway's "Malformed Lambda proxy response",
    a 502: a body that is an object, a list, a number or a boolean is not written out as
    text here (docs/decisions.md, 2026-12-07, the proxy integration's output)."""
    if not isinstance(result, Mapping) or "statusCode" not in result:
        # API Gateway answers a malformed integration response with 502.
        return gateway_error(502, "Internal server error", request_id)
    if not isinstance(result.get("body"), str | None):
        return gateway_error(502, "Internal server error", request_id)
    headers: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, values in (result.get("multiValueHeaders") or {}).items():
        for value in values if isinstance(values, list) else [values]:
            headers.append((name, str(value)))
        seen.add(name.lower())
    for name, value in (result.get("headers") or {}).items():
        if name.lower() not in seen:
            headers.append((name, str(value)))
    headers.append(("x-amzn-RequestId", request_id))
    raw = result.get("body") or ""
    try:
        body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode()
        status = int(result["statusCode"])
    except (ValueError, TypeError):
        return gateway_error(502, "Internal server error", request_id)
    return HttpResponse(status, headers, body)
