"""Browser sessions: open, run steps, read, close, save as a workflow (pagefleet.browsing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query

from functions.api.context import (
    actor,
    base_path,
    browser_sessions,
    documented,
    logger,
    request_id,
    respond,
    tenancy,
    tenant_id,
)
from pagefleet import ids
from pagefleet.browsing.models import (
    COMMAND_ID_PATTERN,
    MAX_WAIT_S,
    CommandView,
    OpenSession,
    OpenSessions,
    OpenStatus,
    SaveAsWorkflow,
    SavedWorkflow,
    SessionFiles,
    SessionView,
    StepsAnswer,
    StepsRequest,
)

if TYPE_CHECKING:
    from pagefleet.jobs.record import JobRecord

# The services are imported by the routes that call them, on first call: a cold start
# imports only what registering the routes needs (docs/performance.md, cold import).
router = Router()

SESSION_ID = Annotated[str, Path(pattern=ids.BROWSER_SESSION_ID, description="the session")]

COMMAND_ID = Annotated[str, Path(pattern=COMMAND_ID_PATTERN, description="the command's id")]


@router.post(
    "/browser-sessions",
    summary="Open a browser session",
    description=(
        "A browser that takes one step at a time (`POST .../steps`), for a person or an "
        "agent. It is a job: it takes one of the tenant's running slots (429 over "
        "`max_running`), and closes after `idle_timeout_s` without a step (default 300, at "
        "most 1800) or `max_duration_s` after it opened."
    ),
    responses=documented({201: ("the session, starting or ready", SessionView)}, 429, 501),
    tags=["browser sessions"],
)
def open_session(body: Annotated[OpenSession, Body()]) -> Response[str]:
    from pagefleet.browsing import service  # first call: cold start
    from pagefleet.tenancy import service as tenants

    tenant, who, audit = tenant_id(router), actor(router), tenancy()

    def audited(job: JobRecord) -> None:  # written while the session's job is queued
        tenants.record(audit, who, "browser_session.opened", tenant_id=tenant, target=job.job_id)

    job = service.open_session(
        browser_sessions(), tenant, body, correlation_id=request_id(router), opened=audited
    )
    logger.info("browser session opened", extra={"job_id": job.job_id, "tenant_id": tenant})
    headers = {"Location": f"{base_path(router)}/browser-sessions/{job.job_id}"}
    return respond(201, service.view(browser_sessions(), job, with_steps=False), headers)


@router.get(
    "/browser-sessions",
    summary="The tenant's open browser sessions, with their cost so far",
    description=(
        "Sessions still `starting` or `ready` (`status` picks one), newest first, each "
        "with its cost so far (its browser-seconds and the platform's share, priced as "
        "`GET /v1/usage` prices a job) and its last activity: the sessions an agent or a "
        "person opened and forgot are found here, and closed with `DELETE`."
    ),
    responses=documented({200: ("the open sessions", OpenSessions)}),
    tags=["browser sessions"],
)
def list_sessions(
    status: Annotated[
        OpenStatus, Query(description="open (starting and ready), starting or ready")
    ] = "open",
) -> Response[str]:
    from pagefleet.browsing import spend  # first call: cold start

    listed = status
    sessions = browser_sessions()
    found = spend.open_sessions(
        sessions.jobs,
        sessions.quotas,
        sessions.require_commands(),
        sessions.pricing,
        tenant_id(router),
        listed,
    )
    return respond(200, OpenSessions(sessions=found))


@router.post(
    "/browser-sessions/<session_id>/steps",
    summary="Run one step, or a list, in the session",
    description=(
        "The steps of the workflow language, with a job's checks, egress policy, "
        "`evaluate` policy and timeouts. The answer: whether they ran (`ok`, `ran`, the "
        "job error shape in `error`), what they extracted, and an observation of the page "
        "(URL, title, ARIA snapshot; a screenshot link with `observe.screenshot`). Each "
        "call is a command with an id (`command_id` or the `Idempotency-Key` header; one "
        "is made up otherwise) run exactly once: a retry with the same id is answered from "
        "the first, never run again. The call waits for the answer while the steps run, "
        "for at most `wait_s` (default 10, at most 25), then answers 202 with the "
        "command's id and a `Location` to read it from (at once while the session is "
        "starting, and after a second when its worker has not taken the command); steps "
        "not started within `deadline_s` never run and are answered "
        "`state: expired`. A closed or lost session is a 409."
    ),
    responses=documented(
        {
            200: ("the outcome and the page after it", StepsAnswer),
            202: ("the command, still to be answered", CommandView),
        },
        404,
        409,
    ),
    tags=["browser sessions"],
)
def run_steps(
    session_id: SESSION_ID,
    body: Annotated[StepsRequest, Body()],
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", pattern=COMMAND_ID_PATTERN),
    ] = None,
) -> Response[str]:
    from pagefleet.browsing import stepping  # first call: cold start

    answer = stepping.run_steps(
        browser_sessions(), tenant_id(router), session_id, body, command_id=idempotency_key
    )
    if isinstance(answer, CommandView):
        where = f"{base_path(router)}/browser-sessions/{session_id}/commands/{answer.command_id}"
        return respond(202, answer, {"Location": where})
    return respond(200, answer)


@router.get(
    "/browser-sessions/<session_id>/commands/<command_id>",
    summary="A command of the session: pending, running, or its answer",
    description=(
        "It reads the command's record. `state` is pending, running, done, expired (its "
        "deadline passed before it started: it never ran) or lost (its worker went while "
        "it ran); `answer` is there once done or expired. With `wait_s`, a command found "
        "running is read until its answer for at most that long (the call is held for the "
        "step's own time, as the call that sent it would have been); without it, or when "
        "the command is pending, done or expired, the call holds nothing."
    ),
    responses=documented({200: ("the command", CommandView)}, 404),
    tags=["browser sessions"],
)
def get_command(
    session_id: SESSION_ID,
    command_id: COMMAND_ID,
    wait_s: Annotated[
        int,
        Query(
            ge=0,
            le=MAX_WAIT_S,
            description="how long to wait for the answer of a command found running; "
            "0 (the default) never waits",
        ),
    ] = 0,
) -> Response[str]:
    from pagefleet.browsing import stepping  # first call: cold start

    view = stepping.read_command(
        browser_sessions(), tenant_id(router), session_id, command_id, wait_s=wait_s
    )
    return respond(200, view)


@router.get(
    "/browser-sessions/<session_id>",
    summary="A browser session: its status and the steps that succeeded",
    responses=documented({200: ("the session", SessionView)}, 404),
    tags=["browser sessions"],
)
def get_session(session_id: SESSION_ID) -> Response[str]:
    from pagefleet.browsing import service  # first call: cold start

    job = service.get_session(browser_sessions(), tenant_id(router), session_id)
    return respond(200, service.view(browser_sessions(), job))


@router.get(
    "/browser-sessions/<session_id>/files",
    summary="The files the session's steps made, with presigned links",
    description=(
        "What its `download`, `screenshot` and `pdf` steps kept, oldest first, each with a "
        "short presigned link and its sha256, open or closed, as long as its command "
        "records are kept (each steps answer's `files` names the ones its steps made)."
    ),
    responses=documented({200: ("the files", SessionFiles)}, 404),
    tags=["browser sessions"],
)
def session_files(session_id: SESSION_ID) -> Response[str]:
    from pagefleet.browsing import answers, service  # first call: cold start

    tenant = tenant_id(router)
    sessions = browser_sessions()
    service.get_session(sessions, tenant, session_id)  # 404 for another tenant's
    made = answers.files_made(
        sessions.presign,
        sessions.require_commands(),
        tenant,
        session_id,
        ttl_s=sessions.presign_ttl_s,
    )
    return respond(200, SessionFiles(session_id=session_id, files=made))


@router.delete(
    "/browser-sessions/<session_id>",
    summary="Close a browser session (idempotent)",
    responses=documented({200: ("the session as it closes", SessionView)}, 404),
    tags=["browser sessions"],
)
def close_session(session_id: SESSION_ID) -> Response[str]:
    from pagefleet.browsing import service  # first call: cold start
    from pagefleet.tenancy import service as tenants

    tenant = tenant_id(router)
    job = service.close_session(browser_sessions(), tenant, session_id)
    tenants.record(
        tenancy(), actor(router), "browser_session.closed", tenant_id=tenant, target=session_id
    )
    return respond(200, service.view(browser_sessions(), job, with_steps=False))


@router.post(
    "/browser-sessions/<session_id>/save-as-workflow",
    summary="Save the steps that succeeded as the next version of a named workflow",
    description=(
        "`inputs` maps an input name to a literal value of the steps: each occurrence "
        "becomes `{{inputs.<name>}}`, and the value is the input's default."
    ),
    responses=documented({201: ("the version stored", SavedWorkflow)}, 404),
    tags=["browser sessions"],
)
def save_as_workflow(
    session_id: SESSION_ID, body: Annotated[SaveAsWorkflow, Body()]
) -> Response[str]:
    from pagefleet.browsing import service  # first call: cold start

    saved = service.save_as_workflow(browser_sessions(), tenant_id(router), session_id, body)
    headers = {"Location": f"{base_path(router)}/workflows/{saved.name}/versions/{saved.version}"}
    return respond(201, saved, headers)
