"""Operator routes (admin key): dead letters and their redrive."""

from __future__ import annotations

import re
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from functions.api.context import actor, documented, require_admin, respond, services, tenancy
from pagefleet import ids
from pagefleet.api.jobs import DeadLetter, DeadLetters, RedriveRequest, RedriveResponse
from pagefleet.errors import InvalidRequest

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()

JOB_REF_PATTERN = ids.JOB_REF


@router.get(
    "/admin/dead-letters",
    summary="Dead-lettered jobs of every tenant (admin key)",
    responses=documented({200: ("the dead-lettered jobs", DeadLetters)}, 403),
    tags=["admin"],
)
def list_dead_letters(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> Response[str]:
    from pagefleet.jobs import sweeper  # first call: cold start

    require_admin(router)
    jobs = sweeper.list_dead_letters(services(), limit=limit)
    return respond(200, DeadLetters(dead_letters=[DeadLetter.of(j) for j in jobs]))


@router.post(
    "/admin/dead-letters/redrive",
    summary="Send dead-lettered jobs back to their queue (admin key)",
    responses=documented({200: ("the ids of the jobs redriven", RedriveResponse)}, 400, 403),
    tags=["admin"],
)
def redrive_dead_letters(request: Annotated[RedriveRequest, Body()]) -> Response[str]:
    from pagefleet.jobs import sweeper  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

    require_admin(router)
    if request.jobs is None:
        redriven = sweeper.redrive_listed(services(), sweeper.list_dead_letters(services()))
    else:
        targets = []
        for index, ref in enumerate(request.jobs):
            if not re.fullmatch(JOB_REF_PATTERN, ref):
                raise InvalidRequest("expected 'tenant_id/job_id'", field=f"jobs[{index}]")
            tenant, _, job_id = ref.partition("/")
            targets.append((tenant, job_id))
        redriven = sweeper.redrive(services(), targets)
    if redriven:
        tenants.record(
            tenancy(), actor(router), "dead_letters.redriven", details={"jobs": redriven[:100]}
        )
    return respond(200, RedriveResponse(redriven=redriven))
