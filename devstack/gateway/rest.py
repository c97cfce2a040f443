"""One API Gateway REST API: ``LambdaRestApi(proxy=True)`` behind a TOKEN authorizer.

Every path and method goes to the one proxy integration (``/`` and ``/{proxy+}``, ANY), as
infra/constructs/api.py deploys it, so the resolver in the function decides what exists.
The TOKEN authorizer runs first, its policy cached per token for ``authorizer_ttl_s`` like
API Gateway's authorizer cache; its policy is evaluated against the method ARN.

Lambda outcomes are answered as API Gateway answers them: a handler error, a crashed
runtime or a malformed proxy result is 502, an invocation over the integration timeout (29 s)
is 504, an event over Lambda's 6 MB payload limit is 413. Authorizer errors are 500, except
the ``Unauthorized`` error, which is 401. Its own answers carry the API's error shape, as the
stack's gateway responses make AWS answer (pagefleet/specs/gateway.py); the public routes
(``GET /openapi.json``) skip the authorizer, as their methods on AWS have none.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from devstack.gateway.events import (
    MAX_PAYLOAD_BYTES,
    PUBLIC_PATHS,
    HttpRequest,
    HttpResponse,
    gateway_error,
    method_arn,
    proxy_resource,
    proxy_response,
    rest_event,
    token_authorizer_event,
)
from devstack.lambda_env import (
    FunctionError,
    InvokeError,
    InvokeTimeout,
    LambdaFunction,
    PayloadTooLarge,
)
from pagefleet.specs.gateway import PUBLIC_ROUTES
from pagefleet.specs.resources import API_STAGE

# API Gateway's default (and, for edge-optimized APIs, maximum) integration timeout.
INTEGRATION_TIMEOUT_S = 29.0


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


def strip_stage(request: HttpRequest, stage: str) -> HttpRequest | None:
    """The request as the integration sees it: its URL path without the leading stage
    (``/v1/jobs`` -> ``/jobs``); None when the URL does not start with the stage."""
    prefix = f"/{stage}"
    raw = request.raw_path
    if raw == prefix or raw.startswith((f"{prefix}/", f"{prefix}?")):
        rest = raw[len(prefix) :]
        return dataclasses.replace(request, raw_path=rest if rest.startswith("/") else "/" + rest)
    return None


class RestApi:
    """Serves every request through the authorizer and the one proxy integration."""

    def __init__(
        self,
        *,
        handler: LambdaFunction,
        authorizer: LambdaFunction | None,
        api_id: str = "local",
        stage: str = API_STAGE,
        authorizer_ttl_s: float = 300,
        identity_header: str = "Authorization",
        integration_timeout_s: float = INTEGRATION_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.handler = handler
        self.authorizer = authorizer
        self.api_id = api_id
        self.stage = stage
        self.authorizer_ttl_s = authorizer_ttl_s
        self.identity_header = identity_header
        self.integration_timeout_s = integration_timeout_s
        self._clock = clock
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._cache_lock = threading.Lock()

    @property
    def functions(self) -> list[LambdaFunction]:
        return [self.handler, *([self.authorizer] if self.authorizer else [])]

    def matches(self, request: HttpRequest) -> bool:
        return True  # the REST API owns every path that no other app claims

    def without_stage(self, request: HttpRequest) -> HttpRequest | None:
        prefix = f"/{self.stage}"
        raw = request.raw_path
        if raw == prefix or raw.startswith((f"{prefix}/", f"{prefix}?")):
            rest = raw[len(prefix) :]
            return dataclasses.replace(
                request, raw_path=rest if rest.startswith("/") else "/" + rest
            )
        return None

    def event_for(
        self, request: HttpRequest, request_id: str, authorizer: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        resource, params = proxy_resource(request.path)
        return rest_event(
            request,
            resource=resource,
            path_parameters=params,
            authorizer=authorizer,
            api_id=self.api_id,
            stage=self.stage,
            request_id=request_id,
        )

    def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = str(uuid.uuid4())
        if len(request.body) > MAX_PAYLOAD_BYTES:
            return gateway_error(413, "Request Entity Too Large", request_id)
        # The URL names the stage first (https://<api>/<stage>/...), as on execute-api; the
        # integration sees the path without it (requestContext.path keeps it).
        staged = self.without_stage(request)
        if staged is None:
            return gateway_error(403, "Forbidden", request_id)
        request = staged
        resource, _ = proxy_resource(request.path)
        public = (request.method, request.path) in PUBLIC_ROUTES
        if resource in PUBLIC_PATHS and not public:
            # The public route's own resource has no other method (API Gateway's answer).
            return gateway_error(403, "Missing Authentication Token", request_id)
        authorizer_context: dict[str, Any] | None = None
        if self.authorizer is not None and not public:
            outcome = self._authorize(request, request_id)
            if isinstance(outcome, HttpResponse):
                return outcome
            authorizer_context = outcome
        event = self.event_for(request, request_id, authorizer_context)
        try:
            result = self.handler.invoke(event, timeout_s=self.integration_timeout_s)
        except InvokeTimeout:
            return gateway_error(504, "Endpoint request timed out", request_id)
        except PayloadTooLarge:
            return gateway_error(413, "Request Too Long", request_id)
        except InvokeError:  # the handler raised or its runtime died
            return gateway_error(502, "Internal server error", request_id)
        return proxy_response(result, request_id)

    def _authorize(self, request: HttpRequest, request_id: str) -> HttpResponse | dict[str, Any]:
        assert self.authorizer is not None
        token = request.header(self.identity_header)
        if not token:
            # API Gateway refuses a request without the identity source before invoking.
            return gateway_error(401, "Unauthorized", request_id)
        arn = method_arn(self.api_id, self.stage, request.method, request.path)
        policy = self._cached_policy(token)
        if policy is None:
            try:
                result = self.authorizer.invoke(token_authorizer_event(token, arn))
            except FunctionError as exc:
                if exc.message == "Unauthorized":
                    return gateway_error(401, "Unauthorized", request_id)
                return gateway_error(500, None, request_id)
            except InvokeError:
                return gateway_error(500, None, request_id)
            if not isinstance(result, Mapping) or "policyDocument" not in result:
                return gateway_error(500, None, request_id)
            policy = dict(result)
            self._store_policy(token, policy)
        if not policy_allows(policy, arn):
            return gateway_error(
                403,
                "User is not authorized to access this resource with an explicit deny",
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
