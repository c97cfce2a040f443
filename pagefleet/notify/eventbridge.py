"""Events on EventBridge, as ``source: pagefleet``, with ids and figures only (no result, no
error text, no records):

- ``Job Finished``: every final state, with the status (``Job Needs Review`` for a job that
  waits for a person);
- ``Job Waiting For Human``: an await_human step parked the job (its prompt is the
  tenant's text, so only its step index, timeout and the console link to its live view
  go);
- ``Job Changed``: a monitor's run that changed, with its summary and baseline;
- ``Schedule Alerting`` / ``Schedule Recovered``: a schedule's turns
  (``pagefleet.notify.schedule_notices``).

Users route them with their own rules (e.g. to SQS, Step Functions, a chat hook). A consumer
of the jobs stream's one reader; a mark per event keeps a stream batch that is delivered
twice from putting it twice (EventBridge itself delivers at least once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.record import JobRecord
from pagefleet.live.events import events_expire_at
from pagefleet.notify.ports import Deliveries, EventBus
from pagefleet.notify.routing import (
    CHANGED,
    FINISHED,
    NEEDS_REVIEW,
    WAITING_FOR_HUMAN,
    job_events,
)
from pagefleet.notify.webhooks import delivery_id
from pagefleet.specs.console_site import job_live_link

SOURCE = "pagefleet"
DETAIL_TYPE = "Job Finished"
CHANGED_DETAIL_TYPE = "Job Changed"
REVIEW_DETAIL_TYPE = "Job Needs Review"
WAITING_DETAIL_TYPE = "Job Waiting For Human"


def detail(job: JobRecord) -> dict[str, Any]:
    return {
        "tenant_id": job.tenant_id,
        "job_id": job.job_id,
        "correlation_id": job.correlation_id,
        "status": job.status.value,
    }


def changed_detail(job: JobRecord) -> dict[str, Any]:
    changes = job.changes
    assert changes is not None
    return {
        **detail(job),
        "schedule_id": job.schedule_id,
        "baseline_job_id": changes.baseline_job_id,
        "summary": changes.summary.model_dump(mode="json"),
    }


def waiting_detail(job: JobRecord, console_url: str | None = None) -> dict[str, Any]:
    human = job.human
    return {
        **detail(job),
        "step_index": human.step_index if human is not None else None,
        "timeout_at": human.timeout_at if human is not None else None,
        # The page a person opens to act: the job's live view with takeover (None: no console).
        "console_url": job_live_link(console_url, job.job_id) if console_url else None,
    }


class EventOnce:
    """Puts an event once per mark (the job's), whatever the stream redelivers."""

    def __init__(self, bus: EventBus, deliveries: Deliveries, *, retention_s: int) -> None:
        self.bus = bus
        self.deliveries = deliveries
        self.retention_s = retention_s

    def put(self, job: JobRecord, mark: str, detail_type: str, body: dict[str, Any]) -> None:
        if self.deliveries.marked(job.tenant_id, job.job_id, mark):
            return
        self.bus.put(source=SOURCE, detail_type=detail_type, detail=body)
        self.deliveries.mark(
            job.tenant_id, job.job_id, mark, expires_at=events_expire_at(job, self.retention_s)
        )


class JobFinishedEvents:
    """``ChangeConsumer``: ``Job Finished`` per final transition, ``Job Changed`` per run
    that changed."""

    name = "eventbridge"

    def __init__(
        self,
        bus: EventBus,
        deliveries: Deliveries,
        *,
        retention_s: int,
        console_url: str | None = None,
    ) -> None:
        self.events = EventOnce(bus, deliveries, retention_s=retention_s)
        self.console_url = console_url

    def handle(self, changes: Sequence[JobChange]) -> None:
        for change in changes:
            job = change.new
            events = {event for _, event in job_events(change)}
            if job is None:
                continue
            if FINISHED in events:
                # The mark predates named events: it stays what it was.
                self.events.put(
                    job, f"event#{delivery_id(job, FINISHED)}", DETAIL_TYPE, detail(job)
                )
            if NEEDS_REVIEW in events:
                mark = f"event#{delivery_id(job, NEEDS_REVIEW)}"
                self.events.put(job, mark, REVIEW_DETAIL_TYPE, detail(job))
            if WAITING_FOR_HUMAN in events:
                mark = f"event#{delivery_id(job, WAITING_FOR_HUMAN)}"
                body = waiting_detail(job, self.console_url)
                self.events.put(job, mark, WAITING_DETAIL_TYPE, body)
            if CHANGED in events:
                mark = f"event#{delivery_id(job, CHANGED)}"
                self.events.put(job, mark, CHANGED_DETAIL_TYPE, changed_detail(job))
