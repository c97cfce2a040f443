"""A local stand-in for API Gateway: HTTP on loopback -> the real Lambda handlers.

Each request becomes an API Gateway REST (v1, proxy integration) event. The TOKEN
authorizer runs first, its policy cached per token like API Gateway's authorizer cache, then
the API handler; the Lambda proxy response is written back as HTTP. Nothing here
re-implements the API: routing, validation and errors all come from the handlers.

The HTTP server hosts "apps" (objects with ``matches`` and ``handle``) so the WebSocket API
can be mounted on the same server later.
"""

from __future__ import annotations

import base64
import fnmatch
import importlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from devstack.loopback import LoopbackServer

# API Gateway refuses request payloads above 10 MB before any Lambda runs.
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
ACCOUNT_ID = "123456789012"
REGION = "us-east-1"

LambdaHandler = Callable[[dict[str, Any], Any], Any]


# --- requests and responses ----------------------------------------------------------------
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


# --- routes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """One API Gateway resource, e.g. ``/v1/jobs/{job_id}``; methods "*" means ANY."""

    resource: str
    methods: frozenset[str] = frozenset({"*"})

    @property
    def pattern(self) -> re.Pattern[str]:
        regex = ""
        for part in re.split(r"(\{[^}]+\})", self.resource):
            if part.startswith("{") and part.endswith("+}"):
                regex += f"(?P<{part[1:-2]}>.+)"
            elif part.startswith("{"):
                regex += f"(?P<{part[1:-1]}>[^/]+)"
            else:
                regex += re.escape(part)
        return re.compile(f"^{regex}$")

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if "*" not in self.methods and method not in self.methods:
            return None
        found = self.pattern.match(path)
        return None if found is None else dict(found.groupdict())


# The REST API's resources, as infra/ declares them (each with ANY, proxied to one Lambda).
REST_ROUTES: tuple[Route, ...] = (
    Route("/v1/jobs"),
    Route("/v1/jobs/{job_id}"),
    Route("/v1/jobs/{job_id}/artifacts"),
    Route("/v1/jobs/{job_id}/{proxy+}"),
)


# --- event shaping (pure; unit-tested) ------------------------------------------------------
def method_arn(api_id: str, stage: str, method: str, path: str) -> str:
    return f"arn:aws:execute-api:{REGION}:{ACCOUNT_ID}:{api_id}/{stage}/{method}/{path.lstrip('/')}"


def token_authorizer_event(token: str, arn: str) -> dict[str, Any]:
    return {"type": "TOKEN", "authorizationToken": token, "methodArn": arn}


def rest_event(
    request: HttpRequest,
    *,
    route: Route,
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
        "resource": route.resource,
        "path": request.path,
        "httpMethod": request.method,
        "headers": headers or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": dict(query) or None,
        "pathParameters": dict(path_parameters) or None,
        "stageVariables": None,
        "requestContext": {
            "resourceId": route.resource,
            "resourcePath": route.resource,
            "httpMethod": request.method,
            "path": f"/{stage}{request.path}",
            "stage": stage,
            "requestId": request_id,
            "extendedRequestId": request_id,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now_ms / 1000)),
            "requestTimeEpoch": now_ms,
            "protocol": "HTTP/1.1",
            "accountId": ACCOUNT_ID,
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
    """Turn a Lambda proxy-integration result into HTTP, as API Gateway does."""
    if not isinstance(result, Mapping) or "statusCode" not in result:
        # API Gateway answers a malformed integration response with 502.
        return HttpResponse.json(502, {"message": "Internal server error"}, request_id)
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
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode()
    return HttpResponse(int(result["statusCode"]), headers, body)


# --- the authorizer's policy ---------------------------------------------------------------
def policy_allows(policy: Mapping[str, Any], arn: str) -> bool:
    """IAM evaluation of an authorizer policy for one method ARN: explicit Deny wins."""
    statements = (policy.get("policyDocument") or {}).get("Statement") or []
    if isinstance(statements, Mapping):
        statements = [statements]
    allowed = False
    for statement in statements:
        resources = statement.get("Resource") or []
        if isinstance(resources, str):
            resources = [resources]
        if not any(fnmatch.fnmatchcase(arn, pattern) for pattern in resources):
            continue
        if statement.get("Effect") == "Deny":
            return False
        if statement.get("Effect") == "Allow":
            allowed = True
    return allowed


def authorizer_request_context(policy: Mapping[str, Any]) -> dict[str, Any]:
    # API Gateway passes context values to the integration as strings.
    context: dict[str, Any] = {
        k: (json.dumps(v) if isinstance(v, bool) else str(v))
        for k, v in (policy.get("context") or {}).items()
    }
    context["principalId"] = str(policy.get("principalId", ""))
    context["integrationLatency"] = 0
    return context


class _Context:
    """The Lambda context object the handlers (and Powertools) read."""

    def __init__(self, function_name: str, timeout_s: float) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class LambdaFunction:
    """A handler given as ``module:function``, imported on first use (after env is set).

    Invocations are serialized: one warm execution environment, as a Lambda runs one event
    at a time (Powertools' resolver keeps the current event on a module-level object).
    """

    def __init__(self, name: str, target: str | LambdaHandler, timeout_s: float = 29) -> None:
        self.name = name
        self._target = target
        self._handler: LambdaHandler | None = None
        self._lock = threading.Lock()
        self._timeout_s = timeout_s

    def _resolve(self) -> LambdaHandler:
        if self._handler is None:
            if callable(self._target):
                self._handler = self._target
            else:
                module, _, attr = self._target.partition(":")
                self._handler = getattr(importlib.import_module(module), attr or "handler")
        return self._handler

    def invoke(self, event: dict[str, Any]) -> Any:
        with self._lock:
            return self._resolve()(event, _Context(self.name, self._timeout_s))


# --- the REST API --------------------------------------------------------------------------
class App(Protocol):
    def matches(self, request: HttpRequest) -> bool: ...

    def handle(self, request: HttpRequest) -> HttpResponse: ...


class RestApi:
    """One API Gateway REST API: routes, a TOKEN authorizer with its cache, one proxy Lambda."""

    def __init__(
        self,
        *,
        handler: LambdaFunction,
        authorizer: LambdaFunction | None,
        routes: Sequence[Route] = REST_ROUTES,
        api_id: str = "local",
        stage: str = "prod",
        authorizer_ttl_s: float = 300,
        identity_header: str = "Authorization",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.handler = handler
        self.authorizer = authorizer
        self.routes = tuple(routes)
        self.api_id = api_id
        self.stage = stage
        self.authorizer_ttl_s = authorizer_ttl_s
        self.identity_header = identity_header
        self._clock = clock
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._cache_lock = threading.Lock()

    def matches(self, request: HttpRequest) -> bool:
        return True  # the REST API owns every path that no other app claims

    def route(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return route, params
        return None

    def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = str(uuid.uuid4())
        if len(request.body) > MAX_PAYLOAD_BYTES:
            return HttpResponse.json(413, {"message": "Request Entity Too Large"}, request_id)
        found = self.route(request.method, request.path)
        if found is None:
            # What API Gateway answers for a path or method it has no resource for.
            return HttpResponse.json(403, {"message": "Missing Authentication Token"}, request_id)
        route, params = found
        authorizer_context: dict[str, Any] | None = None
        if self.authorizer is not None:
            outcome = self._authorize(request, request_id)
            if isinstance(outcome, HttpResponse):
                return outcome
            authorizer_context = outcome
        event = rest_event(
            request,
            route=route,
            path_parameters=params,
            authorizer=authorizer_context,
            api_id=self.api_id,
            stage=self.stage,
            request_id=request_id,
        )
        try:
            result = self.handler.invoke(event)
        except Exception:  # a Lambda that raises: API Gateway answers 502
            return HttpResponse.json(502, {"message": "Internal server error"}, request_id)
        return proxy_response(result, request_id)

    def _authorize(self, request: HttpRequest, request_id: str) -> HttpResponse | dict[str, Any]:
        assert self.authorizer is not None
        token = request.header(self.identity_header)
        if not token:
            # API Gateway refuses a request without the identity source before invoking.
            return HttpResponse.json(401, {"message": "Unauthorized"}, request_id)
        arn = method_arn(self.api_id, self.stage, request.method, request.path)
        policy = self._cached_policy(token)
        if policy is None:
            try:
                result = self.authorizer.invoke(token_authorizer_event(token, arn))
            except Exception as exc:
                if str(exc) == "Unauthorized":
                    return HttpResponse.json(401, {"message": "Unauthorized"}, request_id)
                return HttpResponse.json(500, {"message": None}, request_id)
            if not isinstance(result, Mapping) or "policyDocument" not in result:
                return HttpResponse.json(500, {"message": None}, request_id)
            policy = dict(result)
            self._store_policy(token, policy)
        if not policy_allows(policy, arn):
            return HttpResponse.json(
                403,
                {"message": "User is not authorized to access this resource with an explicit deny"},
                request_id,
            )
        return authorizer_request_context(policy)

    def _cached_policy(self, token: str) -> dict[str, Any] | None:
        if self.authorizer_ttl_s <= 0:
            return None
        with self._cache_lock:
            entry = self._cache.get(token)
            if entry is None or entry[0] <= self._clock():
                self._cache.pop(token, None)
                return None
            return entry[1]

    def _store_policy(self, token: str, policy: dict[str, Any]) -> None:
        if self.authorizer_ttl_s > 0:
            with self._cache_lock:
                self._cache[token] = (self._clock() + self.authorizer_ttl_s, policy)

    def flush_authorizer_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()


# --- the HTTP server -----------------------------------------------------------------------
class _HttpHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "pagefleet-local-gateway/1"
    # Headers and body go out in separate writes; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms per response on loopback).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_PAYLOAD_BYTES:
            response = HttpResponse.json(413, {"message": "Request Entity Too Large"})
            response.headers.append(("Connection", "close"))
            self.close_connection = True
        else:
            body = self.rfile.read(length) if length else b""
            request = HttpRequest(
                method=self.command,
                raw_path=self.path,
                headers=list(self.headers.items()),
                body=body,
                source_ip=self.client_address[0],
            )
            app = next((a for a in self.server.apps if a.matches(request)), None)
            if app is None:
                response = HttpResponse.json(403, {"message": "Missing Authentication Token"})
            else:
                response = app.handle(request)
        self.send_response(response.status)
        for name, value in response.headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    apps: Sequence[App]


class LocalGateway(LoopbackServer):
    """Serves the given apps on ``http://127.0.0.1:<port>`` (port 0 picks a free one)."""

    def __init__(self, apps: Sequence[App], port: int = 8080) -> None:
        server = _Server(("127.0.0.1", port), _HttpHandler)
        server.apps = list(apps)
        super().__init__(server, "local-gateway")


def pagefleet_rest_api(authorizer_ttl_s: float = 300) -> RestApi:
    """The pagefleet REST API wired to the real handlers (imported on the first request)."""
    return RestApi(
        handler=LambdaFunction("pagefleet-api", "functions.api.handler:handler"),
        authorizer=LambdaFunction("pagefleet-authorizer", "functions.authorizer.handler:handler"),
        authorizer_ttl_s=authorizer_ttl_s,
    )
