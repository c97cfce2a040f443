"""Batches: up to 100 job submissions in one request, each answered on its own."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header

from functions.api import errors
from functions.api.context import (
    documented,
    logger,
    request_id,
    respond,
    services,
    tenancy,
    tenant_id,
)
from functions.api.routes.jobs import CORRELATION_PATTERN
from pagefleet.api.batches import BatchItemResult, BatchRequest, BatchResponse
from pagefleet.api.jobs import JobView
from pagefleet.errors import TooManyRequests

# The services are imported by the route on its first call: a cold start imports only what
# registering the routes needs (docs/performance.md, cold import).
router = Router()


@router.post(
    "/batches",
    summary="Submit up to 100 jobs at once",
    description=(
        "Each job counts against the submission rate and the queued jobs like a single "
        "submission and has its own Idempotency-Key; each is answered on its own (`status` "
        "as `POST /v1/jobs` would have answered it), in order."
    ),
    responses=documented({200: ("per-job results", BatchResponse)}, 400, 413),
    tags=["jobs"],
)
def create_batch(
    batch: Annotated[BatchRequest, Body()],
    x_correlation_id: Annotated[
        str | None, Header(alias="X-Correlation-Id", pattern=CORRELATION_PATTERN)
    ] = None,
) -> Response[str]:
    from pagefleet.tenancy import admission  # first call: cold start
    from pagefleet.tenancy.admission import BatchItem  # first call: cold start

    tenant = tenant_id(router)
    correlation = x_correlation_id or request_id(router)
    result = admission.submit_batch(
        services(),
        tenancy().quotas,
        tenant,
        [BatchItem(item.job, item.idempotency_key) for item in batch.jobs],
        correlation_id=correlation,
        status_of=errors.status_of,
    )
    results = [
        BatchItemResult(
            index=item.index,
            status=item.status,
            job_id=item.submitted.job.job_id if item.submitted else None,
            replayed=bool(item.submitted and not item.submitted.created),
            job=JobView.of(item.submitted.job) if item.submitted else None,
            error=(
                errors.error_detail(item.error).model_dump(exclude_none=True)
                if item.error
                else None
            ),
        )
        for item in result.items
    ]
    accepted = sum(1 for r in results if r.status == 202)
    logger.info("batch submitted", extra={"tenant_id": tenant, "accepted": accepted})
    headers = result.rate.headers()
    refused = [i.error for i in result.items if isinstance(i.error, TooManyRequests)]
    if refused:
        headers["Retry-After"] = refused[0].headers.get("Retry-After", "1")
    return respond(200, BatchResponse(accepted=accepted, results=results), headers)
