"""Circuit breakers of target sites, per origin (scheme, host, port)."""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from functions.api.context import breakers, documented, event_of, require_admin, respond, tenant_id
from pagefleet.api.domains import DomainList, DomainView, OriginView
from pagefleet.errors import NotFound
from pagefleet.targets.breakers import split_origin

router = Router()


def _is_admin() -> bool:
    authorizer = event_of(router).request_context.authorizer
    return bool(authorizer and authorizer.get("admin") == "true")


@router.get(
    "/domains",
    summary="Every origin's shared circuit breaker, by site (admin key)",
    responses=documented({200: ("the breakers", DomainList)}, 403),
    tags=["domains"],
)
def list_domains() -> Response[str]:
    # Which sites every tenant automates is not for tenants to see: ops only.
    require_admin(router)
    by_host: dict[str, list[OriginView]] = defaultdict(list)
    for status in breakers().list():
        by_host[split_origin(status.domain)[1]].append(OriginView.of(status, detail=True))
    domains = [DomainView.of(host, origins) for host, origins in sorted(by_host.items())]
    return respond(200, DomainList(domains=domains))


@router.get(
    "/domains/<domain>",
    summary="The circuit breakers of a target site your jobs used (host, or host:port)",
    description=(
        "Each origin of the site that the caller's own jobs used: its shared breaker (state "
        "and next probe time) and the caller's own. Origins only other tenants used, and "
        "sites nobody used, are the same 404, so the route tells nobody which sites others "
        "automate. An admin key sees every origin, with request and failure counts."
    ),
    responses=documented({200: ("the breakers", DomainView)}, 404),
    tags=["domains"],
)
def get_domain(
    domain: Annotated[str, Path(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\[\]-]+$")],
) -> Response[str]:
    tenant = tenant_id(router)
    host, port = _host_and_port(domain.lower())
    detail = _is_admin()
    # A tenant's own breaker on an origin exists once one of its jobs there ended or was
    # held back: that is what "its jobs used the origin" means here.
    own = {s.domain: s for s in breakers().on_host(host, tenant)}
    shared = {s.domain: s for s in breakers().on_host(host)} if detail else {}
    origins = [
        OriginView.of(shared.get(o) or breakers().get(o), own.get(o), detail=detail)
        for o in sorted(set(shared) | set(own))
        if port is None or split_origin(o)[2] == port
    ]
    if not origins:
        whose = "" if detail else " of yours"
        raise NotFound(f"no job{whose} has used {domain}", field="domain")
    body = DomainView.of(host, origins)
    # A tenant gets no counts at all (they are other tenants' traffic), not even as nulls.
    return Response(
        status_code=200,
        content_type="application/json",
        body=body.model_dump_json(exclude_none=not detail),
    )


def _host_and_port(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if text.startswith("["):
        host, _, rest = text.partition("]")
        port = rest.removeprefix(":")
        return host + "]", int(port) if port.isdigit() else None
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return text, None
