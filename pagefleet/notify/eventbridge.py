"""Completion events on EventBridge: every final state, as ``source: pagefleet``,
``detail-type: Job Finished``, with ids and the status only (no result, no error text); a
job that goes to review as ``detail-type: Job Needs Review`` (a person must resolve it).

Users route them with their own rules (e.g. to SQS, Step Functions, a chat hook). A consumer
of the jobs stream's one reader; a mark per transition keeps a stream batch that is delivered
twice from putting the event twice (EventBridge itself delivers at least once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.models import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import ended, events_expire_at
from pagefleet.notify.ports import Deliveries, EventBus
from pagefleet.notify.webhooks import delivery_id

SOURCE = "pagefleet"
DETAIL_TYPE = "Job Finished"
REVIEW_DETAIL_TYPE = "Job Needs Review"


def detail(job: JobRecord) -> dict[str, Any]:
    return {
        "tenant_id": job.tenant_id,
        "job_id": job.job_id,
        "correlation_id": job.correlation_id,
        "status": job.status.value,
    }


class JobFinishedEvents:
    """``ChangeConsumer``: one EventBridge event per final transition."""

    name = "eventbridge"

    def __init__(self, bus: EventBus, deliveries: Deliveries, *, retention_s: int) -> None:
        self.bus = bus
        self.deliveries = deliveries
        self.retention_s = retention_s

    def handle(self, changes: Sequence[JobChange]) -> None:
        for change in changes:
            job = change.new
            if job is None or not change.status_changed or not ended(job.status):
                continue
            mark = f"event#{delivery_id(job)}"
            if self.deliveries.marked(job.tenant_id, job.job_id, mark):
                continue
            kind = REVIEW_DETAIL_TYPE if job.status is JobStatus.NEEDS_REVIEW else DETAIL_TYPE
            self.bus.put(source=SOURCE, detail_type=kind, detail=detail(job))
            self.deliveries.mark(
                job.tenant_id, job.job_id, mark, expires_at=events_expire_at(job, self.retention_s)
            )
