"""Fleet figures for the caller's tenant."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from functions.api.context import documented, respond, services, tenant_id
from pagefleet.api.meta import FleetStatsView

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()


@router.get(
    "/stats",
    summary="Fleet figures: queued, oldest age, running, rates, duration and queue delay",
    responses=documented({200: ("the figures", FleetStatsView)}),
    tags=["stats"],
)
def fleet_stats(
    window_s: Annotated[int, Query(ge=60, le=7 * 24 * 3600, description="seconds back")] = 3600,
) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start

    figures = service.fleet_stats(services(), tenant_id(router), window_s=window_s)
    return respond(200, FleetStatsView.model_validate(dataclasses.asdict(figures)))
