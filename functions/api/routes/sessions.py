"""A tenant's saved login sessions: list, show, delete (their contents never leave S3)."""

from __future__ import annotations

import time
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from functions.api.context import actor, documented, respond, session_archive, tenancy, tenant_id
from pagefleet.errors import NotFound
from pagefleet.tenancy.sessions import NAME_PATTERN
from pagefleet.tenancy.views import SessionInfoView, SessionList

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()

NAME = Annotated[str, Path(pattern=NAME_PATTERN, description="the session's name")]


@router.get(
    "/sessions",
    summary="The caller's saved login sessions",
    responses=documented({200: ("names, sizes, when saved and when they expire", SessionList)}),
    tags=["sessions"],
)
def list_sessions() -> Response[str]:
    now = time.time()
    found = session_archive().list(tenant_id(router))
    return respond(200, SessionList(sessions=[SessionInfoView(**s.as_view(now)) for s in found]))


@router.get(
    "/sessions/<name>",
    summary="One saved login (not its contents)",
    responses=documented({200: ("the session", SessionInfoView)}, 404),
    tags=["sessions"],
)
def get_session(name: NAME) -> Response[str]:
    info = session_archive().info(tenant_id(router), name)
    if info is None:
        raise NotFound(f"no session {name}")
    return respond(200, SessionInfoView(**info.as_view(time.time())))


@router.delete(
    "/sessions/<name>",
    summary="Delete a saved login (idempotent)",
    responses=documented({204: "deleted (or there was none): no body"}),
    tags=["sessions"],
)
def delete_session(name: NAME) -> Response[str]:
    from pagefleet.tenancy import service as tenants  # first call: cold start

    tenant = tenant_id(router)
    existed = session_archive().delete(tenant, name)
    if existed:
        tenants.record(tenancy(), actor(router), "session.deleted", tenant_id=tenant, target=name)
    return Response(status_code=204, body="")
