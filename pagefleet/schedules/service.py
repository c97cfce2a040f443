"""Recurring and one-off jobs: schedule records, mirrored as EventBridge Scheduler schedules.

The record (jobs table, tenant partition) is the source of truth; the Scheduler holds a
mirror that fires ``functions/scheduler`` with the schedule id and the scheduled time. A
record that could not be mirrored stays marked unsynced and the sweeper mirrors it again,
so the two converge. A one-time (``at()``) mirror is deleted by the Scheduler once it has
fired; its record stays (with its run), and nothing mirrors it again. A fire submits the
schedule's job through the normal submit service with the idempotency key
``schedule:<id>:<scheduled time>``: a retried invocation of the same fire finds the same job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pagefleet.errors import InvalidField, InvalidRequest, NotFound
from pagefleet.ids import is_ulid
from pagefleet.jobs.models import new_ulid
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.schedules.expressions import InvalidExpression, check_new, parse
from pagefleet.schedules.health import ScheduleHealth

NEXT_FIRE_TIMES = 5
MAX_SCHEDULES_PER_TENANT = 1000
Overlap = Literal["allow", "skip"]


class Alert(BaseModel):
    """``alert``: after this many failed runs in a row the schedule turns ``alerting``
    (noticed once), and ``ok`` again on its next successful run (noticed once)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    after_failures: int = Field(ge=1, le=100)


class ScheduleChange(BaseModel):
    """A PATCH: any of the fields, each replacing the stored one."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str | None = Field(default=None, min_length=1, max_length=200)
    expression: str | None = Field(default=None, min_length=1, max_length=256)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
    job: dict[str, Any] | None = None
    enabled: bool | None = None
    overlap: Overlap | None = None
    alert: Alert | None = Field(default=None, description="null: no alert")


class ScheduleSpec(BaseModel):
    """What a client sends to create a schedule."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(min_length=1, max_length=200)
    expression: str = Field(min_length=1, max_length=256)
    timezone: str = Field(default="UTC", min_length=1, max_length=64)
    job: dict[str, Any]
    enabled: bool = True
    overlap: Overlap = "allow"
    alert: Alert | None = None

    def check(self, now: datetime) -> ScheduleSpec:
        """Refuse an expression or time zone EventBridge Scheduler would refuse, and one that
        would never fire after ``now``."""
        try:
            check_new(self.expression, self.timezone, now)
        except InvalidExpression as exc:
            raise InvalidRequest(str(exc), field=exc.field) from None
        return self


class ScheduleRun(BaseModel):
    model_config = ConfigDict(defer_build=True)
    scheduled_time: str
    job_id: str | None = None
    skipped: str | None = None  # why no job was made (overlap, paused)
    fired_at: str
    manual: bool = False  # started by POST /v1/schedules/{id}/run, not by the expression


class Schedule(ScheduleSpec):
    model_config = ConfigDict(extra="ignore")

    schedule_id: str
    tenant_id: str
    created_at: str
    updated_at: str
    last_run: ScheduleRun | None = None
    synced: bool = False
    # Kept beside the definition (a change to it keeps them): what the runs said, and the
    # run a monitor compares with instead of the last successful one.
    health: ScheduleHealth = Field(default_factory=ScheduleHealth)
    baseline_job_id: str | None = None

    @field_validator("schedule_id")
    @classmethod
    def _id(cls, value: str) -> str:
        return value.lower()

    def next_fire_times(self, after: datetime, count: int = NEXT_FIRE_TIMES) -> list[str]:
        if not self.enabled:
            return []
        try:
            expr = parse(self.expression, self.timezone)
        except InvalidExpression:
            return []  # stored before today's checks, and unable to fire
        anchor = datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))
        return [_iso(t) for t in expr.next_times(after, count, anchor=anchor)]


class ScheduleStore(Protocol):
    def create(self, schedule: Schedule) -> None: ...

    def replace(self, schedule: Schedule) -> None: ...

    def get(self, tenant_id: str, schedule_id: str) -> Schedule:
        """Raises ``NotFound`` for a schedule the tenant does not have."""

    def list_for(self, tenant_id: str) -> list[Schedule]: ...

    def delete(self, tenant_id: str, schedule_id: str) -> None: ...

    def mark_synced(self, tenant_id: str, schedule_id: str, updated_at: str) -> None: ...

    def unsynced(self, limit: int = 100) -> list[tuple[str, str]]: ...

    def record_run(self, tenant_id: str, schedule_id: str, run: ScheduleRun) -> bool:
        """Store a run once per scheduled time; False if that time already has one."""

    def runs(self, tenant_id: str, schedule_id: str, limit: int) -> list[ScheduleRun]: ...

    def set_baseline(self, tenant_id: str, schedule_id: str, job_id: str | None) -> None:
        """Pin (or with None unpin) the run monitors compare with; NotFound if no schedule."""

    def record_health(
        self, tenant_id: str, schedule_id: str, health: ScheduleHealth, *, counted: str | None
    ) -> bool:
        """Store ``health`` if the newest run counted is still ``counted``; False if another
        write counted a run meanwhile (read again and retry)."""


class SchedulerMirror(Protocol):
    """EventBridge Scheduler (or the local stack's stand-in for it)."""

    def sync(self, schedule: Schedule) -> None: ...

    def remove(self, schedule_id: str) -> None: ...


# --- the API's side ---------------------------------------------------------------------------
def create(
    store: ScheduleStore,
    mirror: SchedulerMirror,
    clock: Clock,
    tenant_id: str,
    spec: ScheduleSpec,
    check_job: Callable[[dict[str, Any]], None],
) -> Schedule:
    """Record the schedule, then mirror it; ``check_job`` refuses a job that could not run."""
    spec.check(_now(clock))
    _check_job(check_job, spec.job)
    if len(store.list_for(tenant_id)) >= MAX_SCHEDULES_PER_TENANT:
        raise InvalidRequest(
            f"a tenant has at most {MAX_SCHEDULES_PER_TENANT} schedules", field="name"
        )
    now = _iso(_now(clock))
    schedule = Schedule(
        **spec.model_dump(),
        schedule_id=new_ulid(),
        tenant_id=tenant_id,
        created_at=now,
        updated_at=now,
    )
    store.create(schedule)
    return _mirror(store, mirror, schedule, now=_now(clock))


def change(
    store: ScheduleStore,
    mirror: SchedulerMirror,
    clock: Clock,
    tenant_id: str,
    schedule_id: str,
    patch: ScheduleChange,
    check_job: Callable[[dict[str, Any]], None],
) -> Schedule:
    current = store.get(tenant_id, schedule_id)
    fields = patch.model_dump(exclude_unset=True)
    if fields.get("job") is not None:
        _check_job(check_job, fields["job"])
    merged = {**current.model_dump(), **{k: v for k, v in fields.items() if v is not None}}
    if "alert" in fields:  # null removes the alert
        merged["alert"] = fields["alert"]
    spec = ScheduleSpec.model_validate({k: merged[k] for k in ScheduleSpec.model_fields})
    if fields.get("expression") is not None or fields.get("timezone") is not None:
        # Only when they change: renaming or pausing a one-off that already fired is fine.
        spec.check(_now(clock))
    updated = Schedule.model_validate(
        {
            **current.model_dump(),
            **spec.model_dump(),
            "updated_at": _iso(_now(clock)),
            "synced": False,
        }
    )
    store.replace(updated)
    return _mirror(store, mirror, updated, now=_now(clock))


def delete(store: ScheduleStore, mirror: SchedulerMirror, tenant_id: str, schedule_id: str) -> None:
    store.get(tenant_id, schedule_id)  # NotFound for another tenant's schedule
    mirror.remove(schedule_id)  # first: a failed delete leaves the record to try again
    store.delete(tenant_id, schedule_id)


def resync(
    store: ScheduleStore, mirror: SchedulerMirror, limit: int = 100, clock: Clock = SYSTEM_CLOCK
) -> int:
    """Sweeper duty: mirror every record whose last mirroring failed."""
    count = 0
    for tenant_id, schedule_id in store.unsynced(limit):
        try:
            schedule = store.get(tenant_id, schedule_id)
            _mirror(store, mirror, schedule, now=_now(clock), strict=True)
            count += 1
        except NotFound:
            continue
    return count


def _fired_once(spec: ScheduleSpec, now: datetime) -> bool:
    """A one-time (``at()``) schedule whose time has passed: it fired (or fires now), and
    the Scheduler deletes its mirror after that (``ActionAfterCompletion: DELETE``)."""
    expression = parse(spec.expression, spec.timezone)
    return expression.kind == "at" and not expression.next_times(now, 1)


def _mirror(
    store: ScheduleStore,
    mirror: SchedulerMirror,
    schedule: Schedule,
    *,
    now: datetime,
    strict: bool = False,
) -> Schedule:
    try:
        # A fired one-time schedule has no mirror to keep (a change of its name or job is
        # the record's alone); one about to fire still has its own, which fires as it is.
        if not _fired_once(schedule, now):
            mirror.sync(schedule)
    except Exception:
        if strict:
            raise
        return schedule  # stays unsynced: the sweeper mirrors it again
    store.mark_synced(schedule.tenant_id, schedule.schedule_id, schedule.updated_at)
    return schedule.model_copy(update={"synced": True})


def _check_job(check_job: Callable[[dict[str, Any]], None], job: dict[str, Any]) -> None:
    try:
        check_job(job)
    except InvalidRequest as exc:
        raise within_job(exc) from None


def within_job(exc: InvalidRequest) -> InvalidRequest:
    """A problem of a schedule's job, as the schedule's request names it (``job.<field>``)."""
    if exc.field and exc.field.startswith("job"):
        return exc
    field = f"job.{exc.field}" if exc.field and exc.field != "body" else "job"
    return type(exc)(exc.message, field=field)


# --- the Scheduler's side ---------------------------------------------------------------------
@dataclass(frozen=True)
class Fired:
    """A fire's run, and whether its scheduled time had one already: the same fire invoked
    again, which made nothing (the job's submission is idempotent per scheduled time)."""

    run: ScheduleRun
    repeated: bool


def fire(
    store: ScheduleStore,
    clock: Clock,
    tenant_id: str,
    schedule_id: str,
    scheduled_time: str,
    *,
    submit: Callable[[dict[str, Any], str], str],
    job_status: Callable[[str], JobStatus | None],
) -> Fired:
    """One fire: submit the schedule's job (idempotent per scheduled time), or skip it.

    ``submit(job, idempotency_key)`` returns the job id; ``job_status(job_id)`` says whether
    the previous run is still going (for ``overlap: skip``). Lambda may invoke a fire twice
    (asynchronous invocation is at least once): the second makes nothing and says so.
    """
    schedule = store.get(tenant_id, schedule_id)
    if schedule.last_run is not None and schedule.last_run.scheduled_time == scheduled_time:
        return Fired(schedule.last_run, repeated=True)  # a fire already recorded
    fired_at = _iso(_now(clock))
    skipped: str | None = None
    if not schedule.enabled:
        skipped = "paused"
    elif schedule.overlap == "skip" and schedule.last_run and schedule.last_run.job_id:
        previous = job_status(schedule.last_run.job_id)
        if previous is not None and not previous.is_final:
            skipped = f"the previous run {schedule.last_run.job_id} is still {previous.value}"
    job_id = None
    if skipped is None:
        try:
            job_id = submit(schedule.job, f"schedule:{schedule_id}:{scheduled_time}")
        except InvalidRequest as refused:
            # Refused as POST /v1/jobs would refuse it (the tenant's rights changed, its
            # workflow is gone): a retry of the fire would be refused alike, so it is
            # recorded, with the reason, rather than retried into the dead-letter queue.
            problem = within_job(refused)
            skipped = f"refused: {problem.field}: {problem.message}"
    run = ScheduleRun(
        scheduled_time=scheduled_time, job_id=job_id, skipped=skipped, fired_at=fired_at
    )
    # False: this time's run was recorded meanwhile (a copy of the fire, after a later one).
    recorded = store.record_run(tenant_id, schedule_id, run)
    return Fired(run, repeated=not recorded)


def run_now(
    store: ScheduleStore,
    clock: Clock,
    tenant_id: str,
    schedule_id: str,
    *,
    submit: Callable[[dict[str, Any], str], str],
) -> ScheduleRun:
    """Start a run of the schedule now (paused or not, whatever the overlap), as a fire
    would; it is listed with the schedule's runs, marked ``manual``."""
    schedule = store.get(tenant_id, schedule_id)
    now = _now(clock)
    when = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    job_id = submit(schedule.job, when)
    run = ScheduleRun(scheduled_time=when, job_id=job_id, fired_at=_iso(now), manual=True)
    store.record_run(tenant_id, schedule.schedule_id, run)
    return run


def pin_baseline(
    store: ScheduleStore,
    tenant_id: str,
    schedule_id: str,
    job_id: str | None,
    job: Callable[[str], JobRecord],
) -> Schedule:
    """Compare the schedule's monitor runs with ``job_id`` (a succeeded run of this
    schedule) instead of the last successful one; None goes back to the last one."""
    schedule = store.get(tenant_id, schedule_id)
    if job_id is not None:
        if not is_ulid(job_id):
            raise InvalidField(f"{job_id!r} is not a job id", field="job_id")
        try:
            record = job(job_id)
        except NotFound:
            raise InvalidField(f"job {job_id} not found", field="job_id") from None
        if record.schedule_id != schedule.schedule_id:
            raise InvalidField(
                f"job {job_id} is not a run of schedule {schedule.schedule_id}", field="job_id"
            )
        if record.status is not JobStatus.SUCCEEDED:
            raise InvalidField(
                f"job {job_id} is {record.status.value}; a baseline is a succeeded run",
                field="job_id",
            )
    store.set_baseline(tenant_id, schedule.schedule_id, job_id)
    return schedule.model_copy(update={"baseline_job_id": job_id})


def _now(clock: Clock) -> datetime:
    return datetime.fromtimestamp(clock.now(), UTC)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
