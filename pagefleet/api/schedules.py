"""The REST API's contract for schedules: a schedule, its runs and its monitor's baseline
(the rest of the contract is ``pagefleet.api``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.api.jobs import JobView
from pagefleet.monitors.changes import ChangeSummary
from pagefleet.schedules.service import Schedule
from pagefleet.view import View


class ScheduleRunView(View):
    scheduled_time: str
    job_id: str | None = None
    skipped: str | None = Field(default=None, description="why no job was made")
    fired_at: str
    manual: bool = Field(default=False, description="started by POST .../run")


class LastChangeView(View):
    job_id: str
    at: str
    summary: ChangeSummary


class ScheduleView(View):
    """A schedule: its expression, its job, when it fires next, and how its runs went."""

    schedule_id: str
    name: str
    expression: str
    timezone: str
    job: dict[str, Any]
    enabled: bool
    overlap: str
    created_at: str
    updated_at: str
    next_fire_times: list[str] = Field(default_factory=list)
    last_run: ScheduleRunView | None = None
    synced: bool = Field(description="mirrored in EventBridge Scheduler")
    alert: dict[str, Any] | None = Field(
        default=None, description='{"after_failures": N}: alerting after N failed runs in a row'
    )
    health: Literal["ok", "alerting"] = "ok"
    consecutive_failures: int = 0
    alerting_since: str | None = None
    last_change: LastChangeView | None = Field(
        default=None, description="the last run whose changes said changed"
    )
    last_success_job_id: str | None = Field(
        default=None, description="the last successful run (the baseline unless one is pinned)"
    )
    baseline_job_id: str | None = Field(default=None, description="the pinned baseline")

    @classmethod
    def of(cls, schedule: Schedule, next_fire_times: list[str]) -> ScheduleView:
        health = schedule.health
        return cls.model_validate(
            {
                **schedule.model_dump(mode="json", exclude={"health"}),
                "next_fire_times": next_fire_times,
                "health": health.status,
                "consecutive_failures": health.consecutive_failures,
                "alerting_since": health.alerting_since,
                "last_change": health.last_change.model_dump(mode="json")
                if health.last_change
                else None,
                "last_success_job_id": health.last_success_job_id,
            }
        )


class BaselineRequest(BaseModel):
    """``PUT /v1/schedules/{id}/baseline``: the run monitors compare with (null: the last
    successful run again)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    job_id: str | None = Field(description="a succeeded run of this schedule; null: unpin")


class ScheduleList(View):
    schedules: list[ScheduleView]


class ScheduleRunJob(JobView):
    """A job a schedule made, with the time it was scheduled for."""


class ScheduleRuns(View):
    """A schedule's jobs, newest first; skipped fires are listed in ``skipped``."""

    jobs: list[ScheduleRunJob]
    skipped: list[ScheduleRunView] = Field(default_factory=list)
