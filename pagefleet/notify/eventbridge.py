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
twice from putting it twice (EventBridge itself delivers at least once). A batch's events go
together (``pagefleet.notify.once``): one read of their marks, a PutEvents per ten events,
one write of the marks of those EventBridge accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.record import JobRecord
from pagefleet.live.events import events_expire_at
from pagefleet.notify.once import hand_on_once
from pagefleet.notify.ports import BusEvent, Deliveries, EventBus, Mark
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
    """Puts each event once per mark (the job's), whatever the stream redelivers: a batch's
    events with one read of their marks, a PutEvents per ten, one write of the marks."""

    def __init__(self, bus: EventBus, deliveries: Deliveries, *, retention_s: int) -> None:
        self.bus = bus
        self.deliveries = deliveries
        self.retention_s = retention_s

    def put(self, job: JobRecord, mark: str, detail_type: str, body: dict[str, Any]) -> None:
        self.put_all([(job, mark, detail_type, body)])

    def put_all(self, events: Sequence[tuple[JobRecord, str, str, dict[str, Any]]]) -> None:
        """``(job, mark, detail type, body)`` in order; raises if EventBridge refused any
        (the accepted ones are marked)."""
        notices = [
            (
                Mark(job.tenant_id, job.job_id, mark, events_expire_at(job, self.retention_s)),
                BusEvent(SOURCE, detail_type, body),
            )
            for job, mark, detail_type, body in events
        ]
        hand_on_once(self.deliveries, notices, self.bus.put_many, "events")


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
        self.events.put_all([e for change in changes for e in self._events_of(change)])

    def _events_of(self, change: JobChange) -> list[tuple[JobRecord, str, str, dict[str, Any]]]:
        job = change.new
        events = {event for _, event in job_events(change)}
        if job is None:
            return []
        out: list[tuple[JobRecord, str, str, dict[str, Any]]] = []
        if FINISHED in events:
            # The mark predates named events: it stays what it was.
            out.append((job, f"event#{delivery_id(job, FINISHED)}", DETAIL_TYPE, detail(job)))
        if NEEDS_REVIEW in events:
            mark = f"event#{delivery_id(job, NEEDS_REVIEW)}"
            out.append((job, mark, REVIEW_DETAIL_TYPE, detail(job)))
        if WAITING_FOR_HUMAN in events:
            mark = f"event#{delivery_id(job, WAITING_FOR_HUMAN)}"
            out.append((job, mark, WAITING_DETAIL_TYPE, waiting_detail(job, self.console_url)))
        if CHANGED in events:
            mark = f"event#{delivery_id(job, CHANGED)}"
            out.append((job, mark, CHANGED_DETAIL_TYPE, changed_detail(job)))
        return out
