"""Job routes: submit, validate, read, list, artifacts, cancel, resolve, continue, usage,
delete."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query

from functions.api.context import (
    actor,
    api_settings,
    base_path,
    documented,
    job_data,
    logger,
    request_id,
    respond,
    services,
    tenancy,
    tenant_id,
)
from pagefleet import ids
from pagefleet.api.jobs import (
    ArtifactLink,
    ArtifactList,
    CancelResponse,
    JobPage,
    JobView,
    ResolveRequest,
    ResolveResponse,
    SubmitResponse,
    ValidationProblem,
    ValidationResult,
)
from pagefleet.errors import InvalidRequest
from pagefleet.jobs.human import ContinueRequest
from pagefleet.jobs.ports import JobFilter
from pagefleet.jobs.replay import ReplayRequest
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission
from pagefleet.tenancy.bucket import RATE_HEADERS_DOC
from pagefleet.tenancy.views import Deleted, JobUsage
from pagefleet.workflow.versions import NAME_PATTERN

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()

JOB_ID = Annotated[str, Path(pattern=ids.JOB_ID, description="the job's id")]
CORRELATION_PATTERN = ids.CORRELATION_ID
WEBHOOK = "notify.webhook"
SUBMIT_RESPONSES = documented({202: ("the job, queued", SubmitResponse)}, 400, 409, 413, 429, 503)
SUBMIT_RESPONSES[202]["headers"] = {
    "Location": {"description": "/v1/jobs/{job_id}", "schema": {"type": "string"}},
    "Idempotent-Replayed": {
        "description": "true when an Idempotency-Key replay returned an existing job",
        "schema": {"type": "string"},
    },
    **RATE_HEADERS_DOC,
}


@router.post(
    "/jobs",
    summary="Submit a job",
    description=(
        "Records the job and queues it: inline `steps`, or a named `workflow` "
        "(`name@version`, or `name` for the latest) with `inputs`. With `delay_seconds` or "
        "`run_at` it waits `scheduled`; with `depends_on` it waits `waiting` until every "
        "parent succeeded. The same Idempotency-Key with the same body returns the same job "
        "(Idempotent-Replayed: true); with another body it is a 409. Over the tenant's "
        "submission rate or queued jobs it is a 429 (Retry-After, RateLimit-*)."
    ),
    responses=SUBMIT_RESPONSES,
    tags=["jobs"],
)
def create_job(
    request: Annotated[JobSubmission, Body()],
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", min_length=1, max_length=255),
    ] = None,
    x_correlation_id: Annotated[
        str | None,
        Header(alias="X-Correlation-Id", pattern=CORRELATION_PATTERN),
    ] = None,
) -> Response[str]:
    from pagefleet.tenancy import admission  # first call: cold start

    tenant = tenant_id(router)
    # The job's correlation id is the one every log line of this request carries.
    correlation = x_correlation_id or request_id(router)
    if logger.get_correlation_id() != correlation:
        logger.set_correlation_id(correlation)
    admitted = admission.submit(
        services(),
        tenancy().quotas,
        tenant,
        request,
        idempotency_key=idempotency_key,
        correlation_id=correlation,
    )
    submitted = admitted.submitted
    job = submitted.job
    logger.info(
        "job submitted",
        extra={"job_id": job.job_id, "tenant_id": tenant, "replayed": not submitted.created},
    )
    headers = {"Location": f"{base_path(router)}/jobs/{job.job_id}", **admitted.rate.headers()}
    if not submitted.created:
        headers["Idempotent-Replayed"] = "true"
    body = SubmitResponse(job_id=job.job_id, status=job.status, job=JobView.of(job))
    return respond(202, body, headers)


@router.post(
    "/jobs/validate",
    summary="Check a job request without submitting it",
    description=(
        "The same body as `POST /v1/jobs`, put through the same checks: the model's, and "
        "those that need your data (a named `workflow` exists and its inputs fit, "
        "`depends_on` jobs exist, times, size, the webhook's address). Nothing is recorded "
        "or queued, and it does not count against the submission rate. 200 with every "
        "problem, each naming its field as the 4xx bodies of `POST /v1/jobs` do; a body "
        "that is not a JSON object is a 400."
    ),
    responses=documented({200: ("whether it is valid, and why not", ValidationResult)}, 400),
    tags=["jobs"],
)
def validate_job(
    body: Annotated[
        Any,
        Body(
            description="a job request, as for POST /v1/jobs",
            json_schema_extra={"$ref": "#/components/schemas/JobSubmission"},
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=255,
            description="as it would be submitted (a workflow using {{job.idempotency_key}})",
        ),
    ] = None,
) -> Response[str]:
    from pagefleet.jobs.planning import validate_body  # first call: cold start

    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object: a job request", field="body")
    problems = validate_body(services(), tenant_id(router), body, idempotency_key=idempotency_key)
    errors = [ValidationProblem(field=p.field, message=p.message) for p in problems]
    return respond(200, ValidationResult(valid=not errors, errors=errors))


@router.get(
    "/jobs/<job_id>",
    summary="Get a job",
    responses=documented({200: ("the job", JobView)}, 404),
    tags=["jobs"],
)
def get_job(job_id: JOB_ID) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start

    job = service.get_job(services(), tenant_id(router), job_id)
    return respond(200, JobView.of(job))


@router.get(
    "/jobs",
    summary="List jobs, newest first",
    description=(
        "Filters combine. With `name`, `workflow` or `schedule_id` the listing reads a "
        "bounded number of jobs a request: where matches are few a page may hold fewer than "
        "`limit` jobs (even none) and still have a `next_cursor` to read on. A cursor works "
        "only with the filters it was issued for (else 400 on `cursor`)."
    ),
    responses=documented({200: ("a page of jobs", JobPage)}, 400),
    tags=["jobs"],
)
def list_jobs(
    status: Annotated[JobStatus | None, Query()] = None,
    name: Annotated[
        str | None, Query(min_length=1, max_length=200, description="the job's name, exact")
    ] = None,
    workflow: Annotated[
        str | None,
        Query(
            max_length=100,
            pattern=NAME_PATTERN,
            description="jobs made from this named workflow (any version)",
        ),
    ] = None,
    schedule_id: Annotated[
        str | None,
        Query(pattern=ids.SCHEDULE_ID, description="jobs this schedule made"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start

    page_max = api_settings().page_size_max
    if limit > page_max:
        raise InvalidRequest(f"limit must be at most {page_max}", field="limit")
    where = JobFilter(name=name, workflow=workflow, schedule_id=schedule_id)
    page = service.list_jobs(
        services(), tenant_id(router), status=status, limit=limit, cursor=cursor, where=where
    )
    body = JobPage(jobs=[JobView.of(j) for j in page.jobs], next_cursor=page.next_cursor)
    return respond(200, body)


@router.get(
    "/jobs/<job_id>/artifacts",
    summary="A job's artifacts, with presigned download URLs",
    responses=documented({200: ("the artifacts", ArtifactList)}, 404),
    tags=["jobs"],
)
def list_artifacts(job_id: JOB_ID) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start

    ttl = api_settings().presign_ttl_seconds
    tenant = tenant_id(router)
    links = service.list_artifacts(services(), tenant, job_id, ttl_seconds=ttl)
    body = ArtifactList(job_id=job_id, artifacts=[ArtifactLink.model_validate(a) for a in links])
    return respond(200, body)


@router.post(
    "/jobs/<job_id>/cancel",
    summary="Cancel a job",
    responses=documented(
        {
            200: ("cancelled (the job had not started)", CancelResponse),
            202: ("stopping (the job is running; its worker stops it)", CancelResponse),
        },
        404,
        409,
    ),
    tags=["jobs"],
)
def cancel_job(job_id: JOB_ID) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start

    job = service.cancel_job(services(), tenant_id(router), job_id)
    # 202 while a running job is being stopped; 200 once it is cancelled.
    status = 200 if job.status is JobStatus.CANCELLED else 202
    return respond(status, CancelResponse.of(job))


@router.post(
    "/jobs/<job_id>/resolve",
    summary="Resolve a job in needs_review: did its irreversible step take effect?",
    description=(
        "`done`: the job ends `succeeded` with the results it has, the steps after the "
        "irreversible one recorded as skipped; with `continue: true` those steps run in a new "
        "attempt instead (for workflows whose following steps start with their own `goto`). "
        "`not_done`: the job runs again from the start. A new run gets a fresh attempt budget. "
        "Audited. 409 naming the state when the job is not in `needs_review`."
    ),
    responses=documented({200: ("the job, resolved", ResolveResponse)}, 400, 404, 409),
    tags=["jobs"],
)
def resolve_job(job_id: JOB_ID, request: Annotated[ResolveRequest, Body()]) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

    tenant = tenant_id(router)
    by = actor(router)
    job = service.resolve_job(
        services(), tenant, job_id, request.outcome, go_on=request.continue_, by=by
    )
    tenants.record(
        tenancy(),
        by,
        "job.resolved",
        tenant_id=tenant,
        target=job_id,
        details={
            "outcome": request.outcome,
            "continue": request.continue_,
            "status": job.status.value,
        },
    )
    return respond(200, ResolveResponse.of(job))


@router.post(
    "/jobs/<job_id>/continue",
    summary="Continue a job waiting_for_human: the person is done, the job goes on",
    description=(
        "The job's `await_human` step parked it in `waiting_for_human` (its prompt and "
        "timeout in `human`); its worker resumes it within seconds in the same browser, at "
        "the next step (once the tenant has a running slot free). Continuing it again "
        "answers the same. Audited. 409 naming the state when the job is not waiting."
    ),
    responses=documented({200: ("the job, its answer recorded", JobView)}, 400, 404, 409),
    tags=["jobs"],
)
def continue_job(job_id: JOB_ID, request: Annotated[ContinueRequest, Body()]) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

    tenant = tenant_id(router)
    by = actor(router)
    note = request.note
    job = service.continue_job(services(), tenant, job_id, note=note)
    tenants.record(
        tenancy(),
        by,
        "job.continued",
        tenant_id=tenant,
        target=job_id,
        details={"status": job.status.value, "note": note},
    )
    return respond(200, JobView.of(job))


@router.post(
    "/jobs/<job_id>/replay",
    summary="Replay an ended job offline, against its recorded traffic only",
    description=(
        '`{"offline": true}`: a new job runs the same steps with the same inputs and options, '
        "every request answered from the job's `har.zip` (one it lacks is aborted; the egress "
        "policy still applies), its secrets rendered as `***`, one attempt. The replay's "
        "`replay_of` names the job, the job's `replays` lists it. 409 when the job has not "
        "ended; 422 when it has no `har.zip` (submit with `options.har`). Audited."
    ),
    responses=documented({202: ("the replay, queued", SubmitResponse)}, 400, 404, 409, 429),
    tags=["jobs"],
)
def replay_job(job_id: JOB_ID, request: Annotated[ReplayRequest, Body()]) -> Response[str]:
    from pagefleet.tenancy import admission  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

    tenant = tenant_id(router)
    admitted = admission.replay(
        services(), tenancy().quotas, tenant, job_id, correlation_id=request_id(router)
    )
    job = admitted.submitted.job
    tenants.record(
        tenancy(),
        actor(router),
        "job.replayed",
        tenant_id=tenant,
        target=job_id,
        details={"replay": job.job_id, "offline": request.offline},
    )
    headers = {"Location": f"{base_path(router)}/jobs/{job.job_id}", **admitted.rate.headers()}
    body = SubmitResponse(job_id=job.job_id, status=job.status, job=JobView.of(job))
    return respond(202, body, headers)


@router.get(
    "/jobs/<job_id>/usage",
    summary="A job's usage per attempt and its cost",
    responses=documented({200: ("the job's usage", JobUsage)}, 404),
    tags=["jobs"],
)
def get_job_usage(job_id: JOB_ID) -> Response[str]:
    from pagefleet.jobs import service  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

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
    from pagefleet.tenancy import service as tenants  # first call: cold start
    from pagefleet.tenancy.retention import delete_job  # first call: cold start

    tenant = tenant_id(router)
    done = delete_job(services(), job_data(), tenant, job_id)
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
