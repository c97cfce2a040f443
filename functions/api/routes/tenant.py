"""A tenant's own routes: its limits, its usage and cost, batches, and deleting a job."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from functions.api import errors
from functions.api.context import (
    api_settings,
    documented,
    logger,
    request_id,
    respond,
    services,
    tenant_id,
)
from functions.api.routes.jobs import CORRELATION_PATTERN, JOB_ID
from functions.api.tenancy_context import actor, data, tenancy
from pagefleet.api.batches import BatchItemResult, BatchRequest, BatchResponse
from pagefleet.api.contract import JobView
from pagefleet.errors import PagefleetError, TooManyRequests
from pagefleet.tenancy.views import (
    Deleted,
    JobUsage,
    TenantView,
    UsageReport,
)

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
    from pagefleet.tenancy import service as tenants

    return respond(200, tenants.tenant_view(tenancy(), tenant_id(router)))


@router.get(
    "/usage",
    summary="Usage and its cost (us-east-1 and ap-south-1), per day and workflow",
    description="Days are UTC; the period defaults to the month so far, at most 92 days.",
    responses=documented({200: ("usage and cost", UsageReport)}, 400, 404),
    tags=["tenant"],
)
def get_usage(first: FROM = None, last: TO = None) -> Response[str]:
    from pagefleet.tenancy import service as tenants

    report = tenants.usage_report(
        tenancy(),
        tenant_id(router),
        first=first,
        last=last,
        worker=api_settings().pricing_worker,
    )
    return respond(200, report)


@router.get(
    "/jobs/<job_id>/usage",
    summary="A job's usage per attempt and its cost",
    responses=documented({200: ("the job's usage", JobUsage)}, 404),
    tags=["jobs"],
)
def get_job_usage(job_id: JOB_ID) -> Response[str]:
    from pagefleet.jobs import service
    from pagefleet.tenancy import service as tenants

    tenant = tenant_id(router)
    service.get_job(services(), tenant, job_id)  # another tenant's job: 404
    usage = tenants.job_usage(tenancy(), tenant, job_id, worker=api_settings().pricing_worker)
    return respond(200, usage)


@router.delete(
    "/jobs/<job_id>",
    summary="Delete a job: its record, events and every attempt's artifacts",
    description=(
        "Idempotent. A running job is cancelled first: 200 `deleted` once it has stopped, or "
        "202 `deleting` when it takes longer (the deletion completes as it stops)."
    ),
    responses=documented(
        {200: ("deleted", Deleted), 202: ("cancelled; deleted once stopped", Deleted)}
    ),
    tags=["jobs"],
)
def delete(job_id: JOB_ID) -> Response[str]:
    from pagefleet.tenancy import service as tenants
    from pagefleet.tenancy.retention import delete_job

    tenant = tenant_id(router)
    done = delete_job(services(), data(), tenant, job_id)
    tenants.record(
        tenancy(),
        actor(router),
        "job.deleted",
        tenant_id=tenant,
        target=job_id,
        details={"status": done.status, "artifacts": done.artifacts, "items": done.items},
    )
    body = Deleted(
        job_id=job_id,
        status=done.status,
        artifacts_deleted=done.artifacts,
        items_deleted=done.items,
    )
    return respond(200 if done.status == "deleted" else 202, body)


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
    from pagefleet.tenancy import admission
    from pagefleet.tenancy.admission import BatchItem

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
            error=_error(item.error) if item.error else None,
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


def _error(exc: PagefleetError) -> dict[str, object]:
    """The error object ``errors.from_domain`` would answer alone (code, message, field,
    details)."""
    listed = exc.details.get("details")  # a list of {field, reason}, as validation gives
    extra = {
        k: v for k, v in exc.details.items() if k not in ("field", "details") and v is not None
    }
    out: dict[str, object] = {"code": exc.code, "message": exc.message}
    if exc.details.get("field"):
        out["field"] = exc.details["field"]
    if isinstance(listed, list):
        out["details"] = listed
    elif extra:
        out["details"] = [extra]
    return out
