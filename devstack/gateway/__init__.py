"""A local stand-in for API Gateway: HTTP on loopback -> the real Lambda handlers.

Each request becomes an API Gateway REST (v1, proxy integration) event (``events``); the
REST API (``rest``) runs the TOKEN authorizer, then the API function, each in its own
execution environments (``devstack.lambda_env``); the HTTP server (``server``) reads and
writes HTTP as API Gateway's front end does. Nothing here re-implements the API: routing,
validation and errors all come from the handlers.
"""

from __future__ import annotations

from collections.abc import Mapping

from devstack.gateway.events import (
    MAX_PAYLOAD_BYTES,
    PROXY_RESOURCE,
    ROOT_RESOURCE,
    HttpRequest,
    HttpResponse,
    gateway_error,
    method_arn,
    proxy_resource,
    proxy_response,
    rest_event,
    token_authorizer_event,
)
from devstack.gateway.rest import (
    INTEGRATION_TIMEOUT_S,
    RestApi,
    authorizer_request_context,
    policy_allows,
    strip_stage,
)
from devstack.gateway.server import READ_TIMEOUT_S, App, LocalGateway
from devstack.lambda_env import LambdaFunction
from pagefleet.specs.resources import API_STAGE

# infra/constructs/api.py deploys the REST API to this stage.
STAGE_NAME = API_STAGE


def pagefleet_rest_api(
    functions: Mapping[str, LambdaFunction], authorizer_ttl_s: float = 300
) -> RestApi:
    """The pagefleet REST API: the ``authorizer`` function in front of the ``api`` one."""
    return RestApi(
        handler=functions["api"],
        authorizer=functions["authorizer"],
        stage=STAGE_NAME,
        authorizer_ttl_s=authorizer_ttl_s,
    )


__all__ = [
    "INTEGRATION_TIMEOUT_S",
    "MAX_PAYLOAD_BYTES",
    "PROXY_RESOURCE",
    "READ_TIMEOUT_S",
    "ROOT_RESOURCE",
    "STAGE_NAME",
    "App",
    "HttpRequest",
    "HttpResponse",
    "LambdaFunction",
    "LocalGateway",
    "RestApi",
    "authorizer_request_context",
    "gateway_error",
    "method_arn",
    "pagefleet_rest_api",
    "policy_allows",
    "proxy_resource",
    "proxy_response",
    "rest_event",
    "strip_stage",
    "token_authorizer_event",
]
