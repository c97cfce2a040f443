"""Circuit breakers of target sites."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from functions.api.context import breakers, documented, require_admin, respond, tenant_id
from pagefleet.api_models import DomainList, DomainView

router = Router()


@router.get(
    "/domains",
    summary="Every circuit breaker (admin key)",
    responses=documented({200: ("the breakers", DomainList)}, 403),
    tags=["domains"],
)
def list_domains() -> Response[str]:
    # Which sites every tenant automates is not for tenants to see: ops only.
    require_admin(router)
    return respond(200, DomainList(domains=[DomainView.of(d) for d in breakers().list()]))


@router.get(
    "/domains/<domain>",
    summary="The circuit breaker of one target site",
    responses=documented({200: ("the breaker", DomainView)}),
    tags=["domains"],
)
def get_domain(
    domain: Annotated[str, Path(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\[\]-]+$")],
) -> Response[str]:
    tenant_id(router)  # any authenticated tenant may ask about a site it names
    return respond(200, DomainView.of(breakers().get(domain.lower())))
