"""A schedule's health: consecutive failed runs, ``alerting`` once, ``recovered`` once.

With ``alert.after_failures`` N a schedule turns ``alerting`` when N runs in a row failed,
and back to ``ok`` on the next successful run: two turns, each noticed once (an event and,
when asked for, a webhook), however many runs fail in between. The health also keeps the
last successful run (a monitor's baseline unless one is pinned) and the last change.

Runs are counted in the order they were made (job ids sort by creation): a run older than
one already counted (two overlapping runs finishing out of order) changes nothing, and so
does a run counted already (a stream batch delivered twice).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.jobs.states import JobStatus
from pagefleet.monitors.changes import Changes, ChangeSummary

# What counts as a failed run for health: the run did not produce a result.
FAILED_RUNS = frozenset(
    {JobStatus.FAILED, JobStatus.TIMED_OUT, JobStatus.DEAD_LETTERED, JobStatus.EXPIRED}
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)


class LastChange(_Model):
    job_id: str
    at: str
    summary: ChangeSummary


class Turn(_Model):
    """The schedule's last change of health, and the run that made it."""

    kind: Literal["alerting", "recovered"]
    job_id: str
    at: str


class ScheduleHealth(_Model):
    status: Literal["ok", "alerting"] = "ok"
    consecutive_failures: int = 0
    last_job_id: str | None = Field(default=None, description="the newest run counted")
    last_success_job_id: str | None = None
    last_failure_job_id: str | None = None
    last_change: LastChange | None = None
    alerting_since: str | None = None
    turn: Turn | None = None


def run_outcome(status: JobStatus) -> bool | None:
    """True for a successful run, False for a failed one, None for one that does not count
    (cancelled) or has not ended."""
    if status is JobStatus.SUCCEEDED:
        return True
    return False if status in FAILED_RUNS else None


def after_run(
    health: ScheduleHealth,
    *,
    job_id: str,
    ok: bool,
    at: str,
    changes: Changes | None,
    after_failures: int | None,
) -> ScheduleHealth | None:
    """The health once run ``job_id`` is counted; None when it must not be (see above)."""
    if health.last_job_id is not None and job_id <= health.last_job_id:
        return None
    update: dict[str, object] = {"last_job_id": job_id}
    if ok:
        update.update(consecutive_failures=0, last_success_job_id=job_id)
        if changes is not None and changes.changed:
            update["last_change"] = LastChange(job_id=job_id, at=at, summary=changes.summary)
        if health.status == "alerting":
            update.update(
                status="ok", alerting_since=None, turn=Turn(kind="recovered", job_id=job_id, at=at)
            )
    else:
        failures = health.consecutive_failures + 1
        update.update(consecutive_failures=failures, last_failure_job_id=job_id)
        if after_failures is not None and failures >= after_failures and health.status == "ok":
            update.update(
                status="alerting",
                alerting_since=at,
                turn=Turn(kind="alerting", job_id=job_id, at=at),
            )
    return health.model_copy(update=update)
