"""Completion webhooks, first half: on a job's final state, queue its signed POST.

A consumer of the jobs stream's one reader. For every change that moves a job into a final
state (or into dead-lettered, or into needs_review: ``job.needs_review``, a person must
resolve it) it finds the webhook (the job's ``notify.webhook``, else the tenant's default), builds
the JSON body once, and sends one message to the webhook queue; ``pagefleet.notify.sender``
POSTs it (signed) and retries with backoff. A mark per notification keeps a stream batch
that is delivered twice from queuing it twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.models import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import ended, events_expire_at
from pagefleet.notify.ports import Deliveries, NotifyDefaults, WebhookQueue

EVENT_NAME = "job.finished"
REVIEW_EVENT_NAME = "job.needs_review"  # an irreversible step's outcome is unknown


def event_name(job: JobRecord) -> str:
    return REVIEW_EVENT_NAME if job.status is JobStatus.NEEDS_REVIEW else EVENT_NAME


def delivery_id(job: JobRecord) -> str:
    """One id per final transition of a job (a redriven job may end twice)."""
    source = f"{job.tenant_id}/{job.job_id}/{job.status.value}/{job.updated_at}"
    return "dlv_" + hashlib.sha256(source.encode()).hexdigest()[:24]


def payload(job: JobRecord, delivery: str) -> dict[str, Any]:
    """What the receiver gets: ids, the final status, times, the error, the artifacts.

    No result (it may be large; read it from the API) and nothing secret."""
    body: dict[str, Any] = {
        "event": event_name(job),
        "delivery_id": delivery,
        "job_id": job.job_id,
        "name": job.request.name,
        "status": job.status.value,
        "attempt": job.attempt,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at or job.updated_at,
        "correlation_id": job.correlation_id,
        "error": job.error.model_dump(mode="json", exclude_none=True) if job.error else None,
        "artifacts": [
            {
                "name": a.name,
                "size": a.size,
                "content_type": a.content_type,
                "sha256": a.sha256,
                "attempt": a.attempt,
            }
            for a in job.artifacts
        ],
        "result_artifact": job.result_artifact,
    }
    if job.checkpoints:
        body["checkpoints"] = [c.model_dump(mode="json") for c in job.checkpoints]
    return body


def webhook_of(job: JobRecord, defaults: NotifyDefaults) -> str | None:
    """The job's own ``notify`` (``{"webhook": null}``: none at all), else the tenant's."""
    notify = job.request.notify
    if notify is not None:
        return notify.webhook
    return defaults.get(job.tenant_id)


class WebhookNotifier:
    """``ChangeConsumer``: queue a webhook delivery for every final transition."""

    name = "webhooks"

    def __init__(
        self,
        queue: WebhookQueue,
        defaults: NotifyDefaults,
        deliveries: Deliveries,
        *,
        retention_s: int,
    ) -> None:
        self.queue = queue
        self.defaults = defaults
        self.deliveries = deliveries
        self.retention_s = retention_s

    def handle(self, changes: Sequence[JobChange]) -> None:
        for change in changes:
            job = change.new
            if job is None or not change.status_changed or not ended(job.status):
                continue
            url = webhook_of(job, self.defaults)
            if not url:
                continue
            delivery = delivery_id(job)
            if self.deliveries.marked(job.tenant_id, job.job_id, f"webhook#{delivery}"):
                continue
            self.queue.send(
                {
                    "tenant_id": job.tenant_id,
                    "job_id": job.job_id,
                    "delivery_id": delivery,
                    "url": url,
                    "job_status": job.status.value,
                    "expires_at": events_expire_at(job, self.retention_s),
                    # The exact bytes every attempt signs and sends.
                    "body": json.dumps(payload(job, delivery), separators=(",", ":")),
                }
            )
            self.deliveries.mark(
                job.tenant_id,
                job.job_id,
                f"webhook#{delivery}",
                expires_at=events_expire_at(job, self.retention_s),
            )
