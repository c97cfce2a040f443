"""What API Gateway's WebSocket API hands to Lambda: $connect, message and $disconnect
events (pure builders), and its route selection (``$request.body.action``)."""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from devstack.constants import LOCAL_ACCOUNT

# infra/constructs/live.py: the routes of the WebSocket API (one integration, the live
# function).
ROUTES = (
    "$connect",
    "$disconnect",
    "subscribe",
    "unsubscribe",
    "watch",
    "unwatch",
    "ping",
    "$default",
)


def new_connection_id() -> str:
    """An id in API Gateway's form (16 characters of base64, e.g. ``L0SM9cOFvHcCIhw=``)."""
    return base64.b64encode(os.urandom(11)).decode()


def select_route(body: str | bytes, routes: Iterable[str] = ROUTES) -> str:
    """``$request.body.action`` when the body is JSON naming a route, else ``$default``."""
    try:
        action = json.loads(body).get("action")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return "$default"
    if isinstance(action, str) and action in routes and not action.startswith("$"):
        return action
    return "$default"


def _context(
    route: str,
    event_type: str,
    connection_id: str,
    *,
    api_id: str,
    stage: str,
    domain: str,
    connected_at_ms: int,
    source_ip: str,
    user_agent: str | None,
) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    request_id = str(uuid.uuid4())
    return {
        "routeKey": route,
        "eventType": event_type,
        "extendedRequestId": request_id,
        "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now_ms / 1000)),
        "messageDirection": "IN",
        "stage": stage,
        "connectedAt": connected_at_ms,
        "requestTimeEpoch": now_ms,
        "identity": {"sourceIp": source_ip, "userAgent": user_agent},
        "requestId": request_id,
        "domainName": domain,
        "connectionId": connection_id,
        "apiId": api_id,
        "accountId": LOCAL_ACCOUNT,
    }


def connect_event(
    connection_id: str,
    *,
    headers: Sequence[tuple[str, str]],
    query: Mapping[str, list[str]],
    **where: Any,
) -> dict[str, Any]:
    """``$connect``: the handshake's headers and query string."""
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for name, value in headers:
        single[name] = value
        multi.setdefault(name, []).append(value)
    return {
        "headers": single,
        "multiValueHeaders": multi,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": dict(query) or None,
        "requestContext": _context("$connect", "CONNECT", connection_id, **where),
        "isBase64Encoded": False,
    }


def message_event(
    connection_id: str, route: str, body: str | bytes, **where: Any
) -> dict[str, Any]:
    """A client's message on ``route``; a binary frame arrives base64-encoded."""
    context = _context(route, "MESSAGE", connection_id, **where)
    context["messageId"] = base64.b64encode(os.urandom(9)).decode()
    if isinstance(body, bytes):
        return {
            "requestContext": context,
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }
    return {"requestContext": context, "body": body, "isBase64Encoded": False}


def disconnect_event(
    connection_id: str, *, status_code: int, reason: str, **where: Any
) -> dict[str, Any]:
    context = _context("$disconnect", "DISCONNECT", connection_id, **where)
    context["disconnectStatusCode"] = status_code
    context["disconnectReason"] = reason
    return {
        "headers": {},
        "multiValueHeaders": {},
        "requestContext": context,
        "isBase64Encoded": False,
    }
