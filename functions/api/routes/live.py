"""Live routes: a job's run events, the WebSocket API's address, connect tickets."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from functions.api.context import (
    documented,
    event_of,
    json_document,
    live,
    respond,
    services,
    tenant_id,
)
from functions.api.routes.jobs import JOB_ID
from pagefleet.api.jobs import EventPage
from pagefleet.api.live import LiveInfo, LiveTicket
from pagefleet.errors import NotFound, Unauthorized
from pagefleet.live import history
from pagefleet.live.events import RunEvent
from pagefleet.live.service import TICKET_TTL_S, issue_ticket

router = Router()

# API Gateway's WebSocket limits (not settable): what clients plan their pings around.
IDLE_TIMEOUT_S = 600
MAX_AGE_S = 7200
PING_INTERVAL_S = 300


@router.get(
    "/jobs/<job_id>/events",
    summary="A job's run events, in order",
    description=(
        "State changes, steps (started / finished, with duration and outcome), navigations, "
        "retries, worker log lines and, with options.capture_console, the page's console. "
        "Pass the last seq you have as `after`; `more` says whether to ask again."
    ),
    responses=documented({200: ("the events", EventPage)}, 404),
    tags=["live"],
)
def list_events(
    job_id: JOB_ID,
    after: Annotated[int, Query(ge=0, le=10**9)] = 0,
    limit: Annotated[int, Query(ge=1, le=history.PAGE_MAX)] = 100,
) -> Response[str]:
    events, more = history.list_events(
        services().store,
        live().events,
        tenant_id(router),
        job_id,
        after=after,
        limit=limit,
        now=int(time.time()),
    )
    page = EventPage(
        job_id=job_id,
        events=[RunEvent.model_validate(e) for e in events],
        next_after=int(events[-1]["seq"]) if events else after,
        more=more,
    )
    # An event carries only the fields of its type: the others are left out, not null.
    return json_document(200, page.model_dump(mode="json", exclude_none=True))


@router.get(
    "/live",
    summary="Where to follow jobs live (the WebSocket API) and its limits",
    responses=documented({200: ("the live API", LiveInfo)}),
    tags=["live"],
)
def live_info() -> Response[str]:
    tenant_id(router)
    body = LiveInfo(
        url=live().live_url,
        idle_timeout_s=IDLE_TIMEOUT_S,
        max_age_s=MAX_AGE_S,
        ping_interval_s=PING_INTERVAL_S,
    )
    return respond(200, body)


@router.post(
    "/live/tickets",
    summary="A single-use ticket to open the WebSocket without a header (browsers)",
    description=f"Valid {TICKET_TTL_S} s, for one connection: open `url` (`?ticket=...`).",
    responses=documented({201: ("the ticket", LiveTicket)}, 404),
    tags=["live"],
)
def create_ticket() -> Response[str]:
    tenant = tenant_id(router)
    authorizer = event_of(router).request_context.authorizer
    key_id = authorizer.get("key_id") if authorizer else None
    if not key_id:
        raise Unauthorized("no key in the authorizer context")
    parts = live()
    if parts.connections is None:
        raise NotFound("live updates are not enabled in this deployment")
    ticket, expires_at = issue_ticket(
        parts.connections, tenant_id=tenant, key_id=str(key_id), now=time.time()
    )
    expires = datetime.fromtimestamp(expires_at, UTC).isoformat().replace("+00:00", "Z")
    body = LiveTicket(
        ticket=ticket,
        expires_at=expires,
        expires_in=TICKET_TTL_S,
        url=f"{parts.live_url}?ticket={ticket}" if parts.live_url else None,
    )
    return respond(201, body)
