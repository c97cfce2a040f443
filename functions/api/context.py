"""What every route needs: settings, services, the caller's tenant, and typed responses.

The API's composition root: the routes get every service and adapter from the functions
here, which take them from ``pagefleet.runtime.RUNTIME`` (built once per execution
environment, on first use).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from pydantic import BaseModel

from functions.xray import function_tracer
from pagefleet.api.errors import ErrorBody
from pagefleet.errors import Forbidden, Unauthorized
from pagefleet.runtime import RUNTIME
from pagefleet.specs import metrics_names

# Imported on first call: the settings (pydantic_settings, dotenv) are read on the first
# invocation, and the services' modules come with the first route that asks for them.
if TYPE_CHECKING:
    from pagefleet.adapters.job_data import AwsJobData
    from pagefleet.browsing.service import Sessions
    from pagefleet.browsing.takeover import Takeovers
    from pagefleet.jobs.record import JobRecord
    from pagefleet.jobs.service import JobServices
    from pagefleet.runtime import LiveApi
    from pagefleet.schedules.service import SchedulerMirror, ScheduleStore
    from pagefleet.specs.settings import ApiSettings
    from pagefleet.targets.breakers import Breakers
    from pagefleet.tenancy.service import Tenancy
    from pagefleet.tenancy.sessions import SessionArchive

SERVICE = "pagefleet-api"
# Nothing here talks to the network at import: the Tracer disables itself outside Lambda
# (no X-Ray daemon to send to), metrics print EMF lines to stdout. EphemeralMetrics: the
# local stack runs every handler in one process, where `Metrics` would share one metric set.
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
tracer = function_tracer(SERVICE)
# Sessions lost are counted where the lost-sessions alarm reads every runtime's count.
lost_sessions = EphemeralMetrics(
    namespace=metrics_names.runtime_namespace(), service=metrics_names.SESSIONS_SERVICE
)


def api_settings() -> ApiSettings:
    from pagefleet.specs.settings import ApiSettings  # read on the first invocation

    return RUNTIME.settings(ApiSettings)


def services() -> JobServices:
    return RUNTIME.job_services(api_settings())


def browser_sessions() -> Sessions:
    return RUNTIME.sessions(api_settings(), on_lost=_session_lost)


def _session_lost(job: JobRecord) -> None:
    # Watched by the lost-sessions alarm (infra/constructs/browser_sessions.py).
    logger.warning("browser session lost", extra={"job_id": job.job_id, "tenant_id": job.tenant_id})
    lost_sessions.add_metric(name=metrics_names.SESSIONS_LOST, unit=MetricUnit.Count, value=1)
    lost_sessions.flush_metrics()


def takeovers() -> Takeovers:
    return RUNTIME.takeovers(api_settings())


def breakers() -> Breakers:
    return RUNTIME.breakers(api_settings())


def tenancy() -> Tenancy:
    return RUNTIME.tenancy(api_settings())


def job_data() -> AwsJobData:
    return RUNTIME.job_data(api_settings())


def session_archive() -> SessionArchive:
    return RUNTIME.session_archive(api_settings())


def schedule_stores() -> tuple[ScheduleStore, SchedulerMirror]:
    """Schedule records and their EventBridge Scheduler mirror."""
    return RUNTIME.schedules(api_settings())


def live() -> LiveApi:
    return RUNTIME.live_api(api_settings())


def event_of(router: Router) -> APIGatewayProxyEvent:
    """The request being routed (the resolver is an APIGatewayRestResolver)."""
    return cast(APIGatewayProxyEvent, router.current_event)


def tenant_id(router: Router) -> str:
    """The tenant comes from the authorizer, never from the request."""
    authorizer = event_of(router).request_context.authorizer
    tenant = authorizer.get("tenant_id") if authorizer else None
    if not tenant:
        raise Unauthorized("no tenant in the authorizer context")
    return str(tenant)


def require_admin(router: Router) -> None:
    authorizer = event_of(router).request_context.authorizer
    if not authorizer or authorizer.get("admin") != "true":
        raise Forbidden("this route needs an admin API key")


def actor(router: Router) -> str:
    """The caller as audit records name it: ``tenant:key_id`` of its API key."""
    authorizer: dict[str, Any] = dict(event_of(router).request_context.authorizer or {})
    return f"{tenant_id(router)}:{authorizer.get('key_id') or '?'}"


def base_path(router: Router) -> str:
    """Where the API's routes sit in the URL the client called: the stage (``/v1``) on the
    execute-api domain, the base path mapping on a custom domain. Every link the API returns
    starts with it, so it resolves on the URL the client used."""
    event = event_of(router)
    full, own = event.request_context.path or "", event.path or ""
    return full[: len(full) - len(own)] if own and full.endswith(own) else ""


def request_id(router: Router) -> str:
    return event_of(router).request_context.request_id


def respond(
    status: int, model: BaseModel, headers: Mapping[str, str] | None = None
) -> Response[str]:
    """A JSON response serialized through its contract model (``pagefleet.api``)."""
    return Response(
        status_code=status,
        content_type="application/json",
        body=model.model_dump_json(),
        headers=dict(headers or {}),
    )


def json_document(status: int, document: Mapping[str, Any]) -> Response[str]:
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(document, separators=(",", ":")),
    )


def documented(
    ok: dict[int, tuple[str, type[BaseModel]] | str], *errors: int
) -> dict[int, OpenAPIResponse]:
    """``responses=`` for a route: its success bodies (a bare description: no body, as a
    204 answers) and the error statuses it may answer."""
    out: dict[int, OpenAPIResponse] = {
        status: {"description": answer, "content": {}}
        if isinstance(answer, str)
        else {"description": answer[0], "content": {"application/json": {"model": answer[1]}}}
        for status, answer in ok.items()
    }
    for status in sorted({401, 422, 500, *errors}):
        out[status] = {
            "description": ERROR_TEXT.get(status, "error"),
            "content": {"application/json": {"model": ErrorBody}},
        }
    return out


ERROR_TEXT = {
    400: "malformed request (invalid JSON, bad cursor, bad header)",
    401: "missing, unknown or revoked API key",
    403: "the route needs an admin API key",
    404: "no such job (or another tenant's)",
    409: "conflict with the job's state or an earlier request",
    413: "request too large",
    422: "validation error naming the field",
    429: "too many requests",
    500: "internal error",
    503: "temporarily unavailable; retry",
}
