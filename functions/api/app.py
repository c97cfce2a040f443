"""The REST API: routes only. Each route parses, calls one service function, responds."""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from functions.api import errors
from pagefleet.breaker import Breakers
from pagefleet.errors import Forbidden, InvalidRequest, PagefleetError, Unauthorized
from pagefleet.jobs import recovery, service
from pagefleet.jobs.service import JobServices
from pagefleet.models import JobRequest
from pagefleet.runtime import RUNTIME
from pagefleet.settings import ApiSettings
from pagefleet.states import JobStatus

logger = Logger(service="pagefleet-api")
app = APIGatewayRestResolver(enable_validation=True)

JOB_ID = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9a-z]+$")]


def api_settings() -> ApiSettings:
    return RUNTIME.settings(ApiSettings)


def services() -> JobServices:
    return RUNTIME.job_services(api_settings())


def tenant_id() -> str:
    """The tenant comes from the authorizer, never from the request."""
    authorizer = app.current_event.request_context.authorizer
    tenant = authorizer.get("tenant_id") if authorizer else None
    if not tenant:
        raise Unauthorized("no tenant in the authorizer context")
    return str(tenant)


def require_admin() -> None:
    authorizer = app.current_event.request_context.authorizer
    if not authorizer or authorizer.get("admin") != "true":
        raise Forbidden("this route needs an admin API key")


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(payload, separators=(",", ":")),
        headers=headers or {},
    )


@app.post("/v1/jobs")
def create_job(request: Annotated[JobRequest, Body()]) -> Response[str]:
    key = app.current_event.headers.get("Idempotency-Key")
    if key is not None and not 1 <= len(key) <= 255:
        raise InvalidRequest("Idempotency-Key must be 1 to 255 characters", field="Idempotency-Key")
    correlation = app.current_event.headers.get("X-Correlation-Id")
    submitted = service.submit_job(
        services(),
        tenant_id(),
        request,
        idempotency_key=key,
        correlation_id=correlation or app.current_event.request_context.request_id,
    )
    job = submitted.job
    headers = {"Location": f"/v1/jobs/{job.job_id}"}
    if not submitted.created:
        headers["Idempotent-Replayed"] = "true"
    return _json(
        202, {"job_id": job.job_id, "status": job.status.value, "job": job.public_view()}, headers
    )


@app.get("/v1/jobs/<job_id>")
def get_job(job_id: JOB_ID) -> Response[str]:
    return _json(200, service.get_job(services(), tenant_id(), job_id).public_view())


@app.get("/v1/jobs")
def list_jobs(
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[str]:
    page_max = api_settings().page_size_max
    if limit > page_max:
        raise InvalidRequest(f"limit must be at most {page_max}", field="limit")
    page = service.list_jobs(services(), tenant_id(), status=status, limit=limit, cursor=cursor)
    return _json(
        200,
        {"jobs": [j.public_view() for j in page.jobs], "next_cursor": page.next_cursor},
    )


@app.get("/v1/jobs/<job_id>/artifacts")
def list_artifacts(job_id: JOB_ID) -> Response[str]:
    ttl = api_settings().presign_ttl_seconds
    artifacts = service.list_artifacts(services(), tenant_id(), job_id, ttl_seconds=ttl)
    return _json(200, {"job_id": job_id, "artifacts": artifacts})


@app.post("/v1/jobs/<job_id>/cancel")
def cancel_job(job_id: JOB_ID) -> Response[str]:
    job = service.cancel_job(services(), tenant_id(), job_id)
    # 202 while a running job is being stopped; 200 once it is cancelled.
    status = 200 if job.status is JobStatus.CANCELLED else 202
    return _json(status, job.public_view())


@app.get("/v1/admin/dead-letters")
def list_dead_letters(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> Response[str]:
    require_admin()
    jobs = recovery.list_dead_letters(services(), limit=limit)
    return _json(
        200,
        {"dead_letters": [{"tenant_id": j.tenant_id, **j.public_view()} for j in jobs]},
    )


class RedriveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Each entry "tenant_id/job_id"; omitted means every dead-lettered job.
    jobs: list[str] | None = Field(default=None, max_length=1000)


@app.post("/v1/admin/dead-letters/redrive")
def redrive_dead_letters(request: Annotated[RedriveRequest, Body()]) -> Response[str]:
    require_admin()
    if request.jobs is None:
        targets = [(j.tenant_id, j.job_id) for j in recovery.list_dead_letters(services())]
    else:
        targets = []
        for index, ref in enumerate(request.jobs):
            tenant, _, job_id = ref.partition("/")
            if not tenant or not job_id:
                raise InvalidRequest("expected 'tenant_id/job_id'", field=f"jobs[{index}]")
            targets.append((tenant, job_id))
    return _json(200, {"redriven": recovery.redrive(services(), targets)})


def breakers() -> Breakers:
    return RUNTIME.breakers(api_settings())


@app.get("/v1/domains")
def list_domains() -> Response[str]:
    # Which sites every tenant automates is not for tenants to see: ops only.
    require_admin()
    return _json(200, {"domains": [d.as_dict() for d in breakers().list()]})


@app.get("/v1/domains/<domain>")
def get_domain(
    domain: Annotated[str, Path(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\[\]-]+$")],
) -> Response[str]:
    tenant_id()  # any authenticated tenant may ask about a site it names
    return _json(200, breakers().get(domain.lower()).as_dict())


@app.exception_handler(RequestValidationError)
def _validation_error(exc: RequestValidationError) -> Response[str]:
    return errors.from_validation(exc.errors())


@app.exception_handler(PagefleetError)
def _domain_error(exc: PagefleetError) -> Response[str]:
    return errors.from_domain(exc)


@app.not_found
def _route_not_found(exc: Exception) -> Response[str]:
    return errors.error_response(404, "route_not_found", f"no route {app.current_event.path}")


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response[str]:
    # Logged with the correlation id; the client gets a generic message, never internals.
    logger.exception("unhandled error")
    return errors.error_response(500, "internal_error", "internal error; retry later")
