"""Schedules: recurring and one-off jobs, mirrored as EventBridge Scheduler schedules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query

from functions.api.context import (
    base_path,
    documented,
    respond,
    schedule_stores,
    services,
    tenancy,
    tenant_id,
)
from pagefleet import ids
from pagefleet.api.jobs import JobView, SubmitResponse
from pagefleet.api.schedules import (
    BaselineRequest,
    ScheduleList,
    ScheduleRunJob,
    ScheduleRuns,
    ScheduleRunView,
    ScheduleView,
)
from pagefleet.errors import NotFound
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import get_job
from pagefleet.schedules import runs
from pagefleet.schedules import service as schedules
from pagefleet.schedules.service import Schedule, ScheduleChange, ScheduleSpec

router = Router()

SCHEDULE_ID = Annotated[str, Path(pattern=ids.SCHEDULE_ID, description="id")]


def _view(schedule: Schedule) -> ScheduleView:
    now = datetime.fromtimestamp(services().clock.now(), UTC)
    return ScheduleView.of(schedule, schedule.next_fire_times(now))


def _check_job(tenant: str) -> Any:
    """A schedule's job is checked now as each of its runs would be (``runs.check_job``)."""

    def check(job: dict[str, Any]) -> None:
        runs.check_job(services(), tenant, job)

    return check


@router.post(
    "/schedules",
    summary="Create a schedule",
    description=(
        "`expression` is what EventBridge Scheduler takes: `cron(m h dom mon dow year)`, "
        "`rate(N minutes|hours|days)` or `at(yyyy-mm-ddThh:mm:ss)`, in `timezone` (IANA). "
        "`job` is a job request (inline steps or a named workflow). `overlap: skip` skips a "
        "fire while the previous run is still going."
    ),
    responses=documented({201: ("the schedule", ScheduleView)}, 400, 501),
    tags=["schedules"],
)
def create_schedule(spec: Annotated[ScheduleSpec, Body()]) -> Response[str]:
    tenant = tenant_id(router)
    store, mirror = schedule_stores()
    made = schedules.create(store, mirror, services().clock, tenant, spec, _check_job(tenant))
    return respond(
        201, _view(made), {"Location": f"{base_path(router)}/schedules/{made.schedule_id}"}
    )


@router.get(
    "/schedules",
    summary="The tenant's schedules",
    responses=documented({200: ("the schedules", ScheduleList)}, 501),
    tags=["schedules"],
)
def list_schedules() -> Response[str]:
    store, _ = schedule_stores()
    found = store.list_for(tenant_id(router))
    return respond(200, ScheduleList(schedules=[_view(s) for s in found]))


@router.get(
    "/schedules/<schedule_id>",
    summary="A schedule, with its next fire times",
    responses=documented({200: ("the schedule", ScheduleView)}, 404, 501),
    tags=["schedules"],
)
def get_schedule(schedule_id: SCHEDULE_ID) -> Response[str]:
    store, _ = schedule_stores()
    return respond(200, _view(store.get(tenant_id(router), schedule_id)))


@router.patch(
    "/schedules/<schedule_id>",
    summary="Change, pause (enabled: false) or resume a schedule",
    responses=documented({200: ("the schedule", ScheduleView)}, 400, 404, 501),
    tags=["schedules"],
)
def change_schedule(
    schedule_id: SCHEDULE_ID, patch: Annotated[ScheduleChange, Body()]
) -> Response[str]:
    tenant = tenant_id(router)
    store, mirror = schedule_stores()
    changed = schedules.change(
        store, mirror, services().clock, tenant, schedule_id, patch, _check_job(tenant)
    )
    return respond(200, _view(changed))


@router.delete(
    "/schedules/<schedule_id>",
    summary="Delete a schedule (its jobs stay)",
    responses=documented({204: "deleted: no body"}, 404, 501),
    tags=["schedules"],
)
def delete_schedule(schedule_id: SCHEDULE_ID) -> Response[str]:
    store, mirror = schedule_stores()
    schedules.delete(store, mirror, tenant_id(router), schedule_id)
    return Response(status_code=204, body="")


@router.get(
    "/schedules/<schedule_id>/runs",
    summary="The jobs a schedule made, newest first",
    responses=documented({200: ("its runs", ScheduleRuns)}, 404, 501),
    tags=["schedules"],
)
def schedule_runs(
    schedule_id: SCHEDULE_ID, limit: Annotated[int, Query(ge=1, le=100)] = 20
) -> Response[str]:
    tenant = tenant_id(router)
    store, _ = schedule_stores()
    store.get(tenant, schedule_id)  # NotFound for another tenant's schedule
    jobs, skipped = [], []
    for run in store.runs(tenant, schedule_id.lower(), limit):
        if run.job_id is None:
            skipped.append(ScheduleRunView.model_validate(run.model_dump()))
            continue
        try:
            record = get_job(services(), tenant, run.job_id, consistent=False)
        except NotFound:
            continue  # deleted since, or past its retention
        jobs.append(ScheduleRunJob.model_validate(JobView.of(record).model_dump(mode="json")))
    return respond(200, ScheduleRuns(jobs=jobs, skipped=skipped))


@router.post(
    "/schedules/<schedule_id>/run",
    summary="Run a schedule's job now",
    description=(
        "Starts one run now, whatever the expression, paused or not: for trying a monitor "
        "without waiting. It is a run of the schedule (listed in its runs, counted in its "
        "health, compared with its baseline) and a submission like `POST /v1/jobs` (the "
        "same rate and queued limits; the same Idempotency-Key returns the same run)."
    ),
    responses=documented({202: ("the run's job, queued", SubmitResponse)}, 400, 404, 409, 429),
    tags=["schedules"],
)
def run_schedule(
    schedule_id: SCHEDULE_ID,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)
    ] = None,
) -> Response[str]:
    tenant = tenant_id(router)
    store, _ = schedule_stores()
    made: list[JobRecord] = []

    def submit(job: dict[str, Any], scheduled_time: str) -> str:
        submitted = runs.submit_run(
            services(),
            tenancy().quotas,
            tenant,
            (schedule_id.lower(), scheduled_time),
            job,
            idempotency_key=idempotency_key,
            by_hand=True,
        )
        made.append(submitted.job)
        return submitted.job.job_id

    schedules.run_now(store, services().clock, tenant, schedule_id, submit=submit)
    job = made[0]
    headers = {"Location": f"{base_path(router)}/jobs/{job.job_id}"}
    return respond(
        202, SubmitResponse(job_id=job.job_id, status=job.status, job=JobView.of(job)), headers
    )


@router.put(
    "/schedules/<schedule_id>/baseline",
    summary="Pin the run a schedule's monitor compares with",
    description=(
        "`job_id`: a succeeded run of this schedule; its result and screenshot are what "
        "later runs are compared with, until it is unpinned (`null`: the last successful "
        "run again)."
    ),
    responses=documented({200: ("the schedule", ScheduleView)}, 400, 404),
    tags=["schedules"],
)
def pin_baseline(
    schedule_id: SCHEDULE_ID, body: Annotated[BaselineRequest, Body()]
) -> Response[str]:
    tenant = tenant_id(router)
    store, _ = schedule_stores()

    def job(job_id: str) -> JobRecord:
        return get_job(services(), tenant, job_id, consistent=False)

    pinned = schedules.pin_baseline(store, tenant, schedule_id, body.job_id, job)
    return respond(200, _view(pinned))
