"""What API Gateway answers on its own, defined once for the stack and the local gateway.

Two things API Gateway decides before (or instead of) the API function:

- the routes that need no API key (``PUBLIC_ROUTES``): infra/constructs/api.py gives each a
  method without the authorizer, the local gateway (devstack/gateway/rest.py) skips the
  authorizer for them, and the OpenAPI document marks them ``security: []``;
- the body of its own errors (a missing or refused key, throttling, a timeout): by default
  ``{"message": "Unauthorized"}``; gateway responses (``GATEWAY_RESPONSES``) make them the
  API's error shape, ``{"error": {"code", "message"}}``, on AWS and locally alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# (METHOD, path after the stage): answered without an API key.
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (("GET", "/openapi.json"), ("GET", "/health"))


@dataclass(frozen=True)
class GatewayResponse:
    """One of API Gateway's response types, answered with our error shape."""

    type: str  # API Gateway's ResponseType
    status: int | None  # None: the status API Gateway chose (the DEFAULT_* types)
    code: str  # the error.code clients see
    when: str  # for the error reference


GATEWAY_RESPONSES: tuple[GatewayResponse, ...] = (
    GatewayResponse(
        "UNAUTHORIZED", 401, "unauthorized", "no API key, or an unknown or revoked one"
    ),
    GatewayResponse(
        "ACCESS_DENIED", 403, "forbidden", "the key's policy does not allow this method and path"
    ),
    GatewayResponse(
        "MISSING_AUTHENTICATION_TOKEN", 403, "route_not_found", "a URL outside the API's stage"
    ),
    GatewayResponse(
        "THROTTLED", 429, "too_many_requests", "over the stage's request rate: retry later"
    ),
    GatewayResponse("REQUEST_TOO_LARGE", 413, "request_too_large", "a request body over 10 MB"),
    GatewayResponse(
        "INTEGRATION_TIMEOUT", 504, "timed_out", "the API function did not answer within 29 s"
    ),
    GatewayResponse("DEFAULT_4XX", None, "bad_request", "any other request API Gateway refuses"),
    GatewayResponse("DEFAULT_5XX", None, "internal_error", "the API function failed or crashed"),
)
_BY_TYPE = {r.type: r for r in GATEWAY_RESPONSES}


def response_template(response: GatewayResponse) -> str:
    """The gateway response's ``application/json`` template. ``$context.error.messageString``
    is API Gateway's message already quoted as a JSON string."""
    code = json.dumps(response.code)
    return '{"error":{"code":' + code + ',"message":$context.error.messageString}}'


def response_type_for(status: int, message: str | None = None) -> GatewayResponse:
    """The response type API Gateway uses for one of its own answers."""
    if message == "Missing Authentication Token":
        return _BY_TYPE["MISSING_AUTHENTICATION_TOKEN"]
    for response in GATEWAY_RESPONSES:
        if response.status == status:
            return response
    return _BY_TYPE["DEFAULT_4XX" if status < 500 else "DEFAULT_5XX"]


def gateway_body(status: int, message: str | None) -> dict[str, Any]:
    """The body AWS renders from ``response_template`` for this answer."""
    response = response_type_for(status, message)
    # What $context.error.messageString holds: the message, quoted ("" when there is none).
    rendered = response_template(response).replace(
        "$context.error.messageString", json.dumps(message or "")
    )
    body: dict[str, Any] = json.loads(rendered)
    return body
