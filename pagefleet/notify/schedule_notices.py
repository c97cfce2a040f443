"""A schedule's notices: its failed runs, and its turns to ``alerting`` and back.

Called by ``pagefleet.schedules.watch`` (``HealthNotices``). A turn puts an EventBridge
event (``Schedule Alerting`` / ``Schedule Recovered``) and, when the run's ``notify.on``
asks (``failed`` / ``recovered``), a webhook (``schedule.alerting`` /
``schedule.recovered``); a failed run of a schedule without ``alert`` is a ``job.failed``
webhook. Each is marked on the run that caused it, so none goes out twice.
"""

from __future__ import annotations

from typing import Any

from pagefleet.jobs.record import JobRecord
from pagefleet.notify.eventbridge import EventOnce, detail
from pagefleet.notify.routing import ALERTING, FAILED, RECOVERED
from pagefleet.notify.webhooks import Outbox
from pagefleet.schedules.health import Turn
from pagefleet.schedules.service import Schedule

ALERTING_DETAIL_TYPE = "Schedule Alerting"
RECOVERED_DETAIL_TYPE = "Schedule Recovered"


def schedule_detail(schedule: Schedule, job: JobRecord, turn: Turn) -> dict[str, Any]:
    health = schedule.health
    return {
        **detail(job),
        "schedule_id": schedule.schedule_id,
        "schedule_name": schedule.name,
        "health": health.status,
        "consecutive_failures": health.consecutive_failures,
        "after_failures": schedule.alert.after_failures if schedule.alert else None,
        "at": turn.at,
    }


class ScheduleNotices:
    def __init__(self, outbox: Outbox | None, events: EventOnce | None) -> None:
        self.outbox = outbox
        self.events = events

    def failed_run(self, job: JobRecord) -> None:
        if self.outbox is not None:
            self.outbox.post(job, "failed", FAILED)

    def turned(self, schedule: Schedule, job: JobRecord, turn: Turn) -> None:
        body = schedule_detail(schedule, job, turn)
        alerting = turn.kind == "alerting"
        if self.events is not None:
            detail_type = ALERTING_DETAIL_TYPE if alerting else RECOVERED_DETAIL_TYPE
            self.events.put(job, f"event#{detail_type}#{schedule.schedule_id}", detail_type, body)
        if self.outbox is not None:
            extra = {"schedule": {k: v for k, v in body.items() if k not in detail(job)}}
            if alerting:
                self.outbox.post(job, "failed", ALERTING, extra)
            else:
                self.outbox.post(job, "recovered", RECOVERED, extra)
