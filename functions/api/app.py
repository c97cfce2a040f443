"""The REST API: one resolver including a router per area; errors map to HTTP in errors.py."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.metrics import MetricUnit

from functions.api import errors
from functions.api.context import api_settings, breakers, logger, metrics, services
from functions.api.routes import (
    admin,
    admin_tenants,
    batches,
    browser_sessions,
    domains,
    jobs,
    live,
    mcp,
    meta,
    notifications,
    schedules,
    sessions,
    stats,
    takeover,
    tenant,
    workflows,
)
from pagefleet.errors import PagefleetError, TooManyRequests
from pagefleet.specs.metrics_names import TENANT_REFUSALS

app = APIGatewayRestResolver(enable_validation=True)
_AREAS = (jobs, batches, workflows, schedules, stats, admin, domains, meta, live, notifications)
for _area in (*_AREAS, tenant, sessions, browser_sessions, takeover, admin_tenants, mcp):
    app.include_router(_area.router)

# Re-exported: tests and the local stack reach the API's services through this module.
__all__ = ["api_settings", "app", "breakers", "logger", "services"]


@app.exception_handler(RequestValidationError)
def _validation_error(exc: RequestValidationError) -> Response[str]:
    return errors.from_validation(exc.errors())


@app.exception_handler(PagefleetError)
def _domain_error(exc: PagefleetError) -> Response[str]:
    if isinstance(exc, TooManyRequests):  # watched by the tenant refusals alarm
        metrics.add_metric(name=TENANT_REFUSALS, unit=MetricUnit.Count, value=1)
    return errors.from_domain(exc)


@app.not_found
def _route_not_found(exc: Exception) -> Response[str]:
    return errors.error_response(404, "route_not_found", f"no route {app.current_event.path}")


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response[str]:
    # A fault of ours, never of the request (hostile input is refused before it gets here).
    # Logged with the correlation id; the client gets that id, never internals.
    logger.exception("unhandled error")
    return errors.internal_error(exc, app.current_event.request_context.request_id)
