"""Remote MCP: the agent tools at ``POST /v1/mcp`` over MCP's Streamable HTTP transport
(stateless, JSON answers), behind the same key authorizer as every route.

The tools act as the caller: through this same API, with the request's own key, so a tool
call is exactly what the stdio server (``pagefleet mcp``) would have sent.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.api import errors
from functions.api.context import documented, event_of, tenant_id
from pagefleet.agents import REMOTE_WAIT_S
from pagefleet.api.meta import McpAnswer
from pagefleet.client import PagefleetClient
from pagefleet.errors import Unauthorized

router = Router()
# The inner calls' own timeout: they answer within the tools' wait, under API Gateway's.
INNER_TIMEOUT_S = 25


def _own_url() -> str:
    """This API's address as the caller reached it (the stage is the path's /v1)."""
    event = event_of(router)
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    host = event.request_context.domain_name or headers.get("host", "")
    loopback = host.startswith(("127.", "localhost"))
    scheme = headers.get("x-forwarded-proto") or ("http" if loopback else "https")
    return f"{scheme}://{host}"


def _key() -> str:
    headers = {k.lower(): v for k, v in (event_of(router).headers or {}).items()}
    scheme, _, key = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("send Authorization: Bearer <API key>")
    return key.strip()


def _answer(method: str) -> Response[bytes]:
    """The SDK transport's answer to this request."""
    from pagefleet.agents import remote  # the MCP SDK: imported by this route only

    tenant_id(router)  # the authorizer's tenant, as every route asks
    event = event_of(router)
    body = event.decoded_body or ""
    with PagefleetClient(_own_url(), _key(), timeout=INNER_TIMEOUT_S) as client:
        answered = remote.answer(
            client,
            method=method,
            headers={k: v for k, v in (event.headers or {}).items() if v is not None},
            body=body.encode() if isinstance(body, str) else body,
        )
    content_type = answered.headers.get("content-type", "application/json")
    kept = {
        k: v for k, v in answered.headers.items() if k not in ("content-type", "content-length")
    }
    return Response(
        status_code=answered.status, content_type=content_type, body=answered.body, headers=kept
    )


@router.post(
    "/mcp",
    summary="The agent tools over MCP (Streamable HTTP, stateless)",
    description=(
        "MCP's Streamable HTTP transport without sessions: send each JSON-RPC message "
        "(initialize, tools/list, tools/call, notifications) as its own POST with "
        "`Accept: application/json, text/event-stream`; the answer is JSON. The tools are "
        "those of `pagefleet mcp` (docs/mcp.md), acting as your key; a tool waits at most "
        f"{REMOTE_WAIT_S} s (API Gateway ends a request at 29 s), then says to call "
        "again."
    ),
    responses=documented(
        {
            200: ("the JSON-RPC answer", McpAnswer),
            202: "a notification, accepted",
            # The SDK's transport answers a body that is not JSON-RPC with its own error.
            400: ("a message that is not valid JSON-RPC: its JSON-RPC error", McpAnswer),
        },
        406,
    ),
)
def post_mcp() -> Response[bytes]:
    return _answer("POST")


@router.get("/mcp", include_in_schema=False)
def get_mcp() -> Response[str]:
    # A stateless server sends nothing unasked (MCP allows a 405 here); the SDK's own
    # transport would hold the request open for a stream that never comes.
    return errors.error_response(
        405,
        "method_not_allowed",
        "this MCP endpoint is stateless: POST each JSON-RPC message",
        headers={"Allow": "POST"},
    )
