"""Each scheduled run's outcome counted into its schedule's health, and its turns noticed.

A consumer of the jobs stream's one reader: when a job a schedule made ends (succeeded, or
failed in a way that counts, ``schedules.health``), the schedule's health is updated with
a write conditioned on the run it last counted, so concurrent batches and redelivered ones
count each run once. Then, each once (the notices are marked per run):

- a failed run of a schedule without ``alert`` is noticed as ``job.failed``; with
  ``alert``, failed runs are noticed only by the schedule's turn to ``alerting``;
- a turn (``alerting``, ``recovered``) is noticed by the run that made it, also when the
  write landed in an earlier delivery of the same batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pagefleet.errors import NotFound
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock
from pagefleet.jobs.record import JobRecord
from pagefleet.schedules.health import Turn, after_run, run_outcome
from pagefleet.schedules.service import Schedule, ScheduleStore

# Optimistic writes lost to a concurrent count before the batch is failed (and redelivered).
WRITE_TRIES = 5


class HealthNotices(Protocol):
    """How a schedule's runs and turns are told (``pagefleet.notify.schedule_notices``)."""

    def failed_run(self, job: JobRecord) -> None: ...

    def turned(self, schedule: Schedule, job: JobRecord, turn: Turn) -> None: ...


class ScheduleWatch:
    """``ChangeConsumer``: schedules' health from their runs' outcomes."""

    name = "schedule_health"

    def __init__(
        self, store: ScheduleStore, notices: HealthNotices, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.store = store
        self.notices = notices
        self.clock = clock

    def handle(self, changes: Sequence[JobChange]) -> None:
        for change in changes:
            job = change.new
            if job is None or job.schedule_id is None or not change.status_changed:
                continue
            ok = run_outcome(job.status)
            if ok is not None:
                self._count(job, ok)

    def _count(self, job: JobRecord, ok: bool) -> None:
        assert job.schedule_id is not None
        for _ in range(WRITE_TRIES):
            try:
                schedule = self.store.get(job.tenant_id, job.schedule_id)
            except NotFound:
                if not ok:  # a deleted schedule's run: noticed as any job's
                    self.notices.failed_run(job)
                return
            alert = schedule.alert.after_failures if schedule.alert else None
            health = after_run(
                schedule.health,
                job_id=job.job_id,
                ok=ok,
                at=job.finished_at or job.updated_at,
                changes=job.changes,
                after_failures=alert,
            )
            if health is None:
                break  # counted already (a redelivery), or older than the newest counted
            counted = schedule.health.last_job_id
            if self.store.record_health(
                job.tenant_id, schedule.schedule_id, health, counted=counted
            ):
                schedule = schedule.model_copy(update={"health": health})
                break
        else:
            raise RuntimeError(f"schedule {job.schedule_id}: health kept changing under us")
        if not ok and schedule.alert is None:
            self.notices.failed_run(job)
        turn = schedule.health.turn
        if turn is not None and turn.job_id == job.job_id:
            self.notices.turned(schedule, job, turn)
