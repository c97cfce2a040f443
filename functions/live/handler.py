"""The WebSocket API's routes ($connect, $disconnect, subscribe, unsubscribe, watch, unwatch,
ping, $default) and, on an EventBridge schedule, the reaper: followers of browser sessions
that ended are removed (counted as ``LeftoversRemoved``, 0 included), then connections that
follow nothing are closed.

Parse API Gateway's WebSocket event, call one function of ``pagefleet.live.service`` (or
``.watch``),
answer with the route's response (``body`` goes to the client: the route has a response).
"""

from __future__ import annotations

import json
from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    from functions.lambda_context import lambda_entry
    from functions.xray import function_tracer
    from pagefleet.errors import Unauthorized
    from pagefleet.live import service, watch
    from pagefleet.live.messages import error_message
    from pagefleet.live.service import LiveServices
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import LiveSettings

SERVICE = "pagefleet-live"
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
# Leftovers removed here are counted where every pass's are (docs/runbooks.md "Leftovers").
leftovers = EphemeralMetrics(
    namespace=metrics_names.runtime_namespace(), service=metrics_names.SESSIONS_SERVICE
)
tracer = function_tracer(SERVICE)
CORRELATION_ID_PATH = "requestContext.requestId"


def services() -> LiveServices:
    return RUNTIME.live_services(RUNTIME.settings(LiveSettings))


def _header(event: dict[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def _reply(message: dict[str, Any], status: int = 200) -> dict[str, Any]:
    return {"statusCode": status, "body": json.dumps(message, separators=(",", ":"))}


def on_connect(event: dict[str, Any], connection_id: str) -> dict[str, Any]:
    query = event.get("queryStringParameters") or {}
    try:
        connection = service.connect(
            services(),
            connection_id,
            authorization=_header(event, "Authorization"),
            ticket=query.get("ticket"),
        )
    except Unauthorized as refused:
        logger.info("connection refused", extra={"reason": refused.message})
        metrics.add_metric(name=metrics_names.LIVE_REFUSED, unit=MetricUnit.Count, value=1)
        return _reply(error_message("unauthorized", refused.message), 401)
    logger.info("connected", extra={"tenant_id": connection.tenant_id})
    metrics.add_metric(name=metrics_names.LIVE_CONNECTS, unit=MetricUnit.Count, value=1)
    return {"statusCode": 200}


def on_message(route: str, event: dict[str, Any], connection_id: str) -> dict[str, Any]:
    body = event.get("body")
    if route == "subscribe":
        return _reply(service.subscribe(services(), connection_id, body))
    if route == "unsubscribe":
        return _reply(service.unsubscribe(services(), connection_id, body))
    if route == "watch":
        return _reply(watch.watch(services(), connection_id, body))
    if route == "unwatch":
        return _reply(watch.unwatch(services(), connection_id, body))
    if route == "ping":
        return _reply({"type": "pong"})
    return _reply(
        error_message(
            "unknown_action",
            'send {"action": "subscribe" | "unsubscribe" | "watch" | "unwatch" | "ping", ...}',
        )
    )


def reap() -> dict[str, Any]:
    """The minute's pass: followers of ended sessions out, then idle connections closed."""
    svc = services()
    unfollowed = service.unfollow_ended(svc)
    if unfollowed:
        logger.warning("followers of ended sessions removed", extra={"followers": unfollowed})
    leftovers.add_metric(
        name=metrics_names.LEFTOVERS_REMOVED, unit=MetricUnit.Count, value=unfollowed
    )
    leftovers.flush_metrics()
    closed = service.reap_idle(svc)
    count = len(closed)
    if count:
        metrics.add_metric(name=metrics_names.LIVE_REAPED, unit=MetricUnit.Count, value=count)
    logger.info("idle connections closed", extra={"closed": count})
    return {"closed": count, "followers_removed": unfollowed}


@lambda_entry(SERVICE)
@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("source") == "aws.events":
        return reap()
    context_ = event.get("requestContext") or {}
    route = str(context_.get("routeKey", ""))
    connection_id = str(context_.get("connectionId", ""))
    logger.append_keys(connection_id=connection_id, route=route)
    if route == "$connect":
        return on_connect(event, connection_id)
    if route == "$disconnect":
        service.disconnect(services(), connection_id)
        logger.info("disconnected", extra={"code": context_.get("disconnectStatusCode")})
        return {"statusCode": 200}
    return on_message(route, event, connection_id)
