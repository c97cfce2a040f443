"""Operator routes (admin key) for tenants: limits, every tenant's usage, the audit log."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from functions.api.context import actor, api_settings, documented, require_admin, respond, tenancy
from functions.api.routes.tenant import FROM, TO
from pagefleet import ids
from pagefleet.tenancy.limits import LimitsChange
from pagefleet.tenancy.views import AuditPage, TenantsUsage, TenantView

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()

TENANT = Annotated[str, Path(pattern=ids.TENANT_ID, description="tenant id")]


@router.get(
    "/admin/tenants/<tenant>",
    summary="A tenant's limits and current usage (admin key)",
    responses=documented({200: ("limits and current usage", TenantView)}, 403),
    tags=["admin"],
)
def get_tenant(tenant: TENANT) -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    require_admin(router)
    return respond(200, tenants.tenant_view(tenancy(), tenant))


@router.patch(
    "/admin/tenants/<tenant>/limits",
    summary="Change a tenant's limits (admin key)",
    description=(
        "Fields left out keep their value; `reset` puts named limits back to the stage "
        "default. Takes effect within seconds on every API function and worker."
    ),
    responses=documented({200: ("the tenant's limits now", TenantView)}, 400, 403),
    tags=["admin"],
)
def set_limits(tenant: TENANT, change: Annotated[LimitsChange, Body()]) -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    require_admin(router)
    return respond(200, tenants.set_limits(tenancy(), tenant, change, actor=actor(router)))


@router.get(
    "/admin/usage",
    summary="Every tenant's usage and cost over a period (admin key)",
    responses=documented({200: ("usage per tenant", TenantsUsage)}, 400, 403, 404),
    tags=["admin"],
)
def every_tenant_usage(first: FROM = None, last: TO = None) -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    require_admin(router)
    worker = api_settings().pricing_worker
    usage = tenants.every_tenant_usage(tenancy(), first=first, last=last, worker=worker)
    return respond(200, usage)


@router.get(
    "/admin/audit",
    summary="Audit records, newest first (admin key)",
    responses=documented({200: ("a page of audit records", AuditPage)}, 403),
    tags=["admin"],
)
def audit(
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before: Annotated[str | None, Query(pattern=ids.AUDIT_ID)] = None,
) -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    require_admin(router)
    return respond(200, tenants.audit_page(tenancy(), limit=limit, before=before))
