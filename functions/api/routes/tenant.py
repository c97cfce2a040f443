"""The tenant's own resources: its limits and current use, its usage and cost."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from functions.api.context import api_settings, documented, respond, tenancy, tenant_id
from pagefleet.tenancy.views import TenantView, UsageReport

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()

DAY = r"^\d{4}-\d{2}-\d{2}$"
FROM = Annotated[str | None, Query(alias="from", pattern=DAY, description="first day, UTC")]
TO = Annotated[str | None, Query(alias="to", pattern=DAY, description="last day, UTC")]


@router.get(
    "/tenant",
    summary="The caller's limits and what it uses right now",
    responses=documented({200: ("limits and current usage", TenantView)}),
    tags=["tenant"],
)
def get_tenant() -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    return respond(200, tenants.tenant_view(tenancy(), tenant_id(router)))


@router.get(
    "/usage",
    summary="Usage and its cost (us-east-1 and ap-south-1), per day and workflow",
    description="Days are UTC; the period defaults to the month so far, at most 92 days.",
    responses=documented({200: ("usage and cost", UsageReport)}, 400, 404),
    tags=["tenant"],
)
def get_usage(first: FROM = None, last: TO = None) -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    report = tenants.usage_report(
        tenancy(),
        tenant_id(router),
        first=first,
        last=last,
        worker=api_settings().pricing_worker,
    )
    return respond(200, report)
