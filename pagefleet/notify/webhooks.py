"""Webhooks, first half: for each notification a job's change makes, queue its signed POST.

A consumer of the jobs stream's one reader. For every change it asks the routing
(``pagefleet.notify.routing``) what the change is notified as (``job.finished`` on every
final state; ``job.changed``, ``job.failed``, ``job.needs_review`` when the job's
``notify.on`` asks), finds the webhook (the job's ``notify.webhook``, else the tenant's
default), builds the JSON body once, and sends one message to the webhook queue;
``pagefleet.notify.sender`` POSTs it (signed) and retries with backoff. A mark per
notification keeps a stream batch that is delivered twice from queuing it twice; a batch's
notifications go together (``pagefleet.notify.once``: one read of their marks, a
SendMessageBatch per ten, one write of the marks).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.record_size import bounded_changes
from pagefleet.jobs.request_parts import NotifyTopic
from pagefleet.live.events import events_expire_at
from pagefleet.notify.once import hand_on_once
from pagefleet.notify.ports import Deliveries, Mark, NotifyDefaults, WebhookQueue
from pagefleet.notify.routing import (
    CHANGED,
    FINISHED,
    WAITING_FOR_HUMAN,
    job_events,
    webhook_for,
)
from pagefleet.specs.console_site import job_live_link

EVENT_NAME = FINISHED
# A changed webhook carries the first records that changed, within this many bytes.
CHANGED_RECORDS = 10
CHANGED_MAX_BYTES = 32 * 1024


def delivery_id(job: JobRecord, event: str = FINISHED) -> str:
    """One id per notification of a job: per final transition for ``job.finished`` (a
    redriven job may end twice), per event and transition for the others."""
    source = f"{job.tenant_id}/{job.job_id}/{job.status.value}/{job.updated_at}"
    if event != FINISHED:
        source += f"/{event}"
    return "dlv_" + hashlib.sha256(source.encode()).hexdigest()[:24]


def payload(
    job: JobRecord, delivery: str, event: str = FINISHED, *, console_url: str | None = None
) -> dict[str, Any]:
    """What the receiver gets: ids, the status, times, the error, the artifacts; for
    ``job.changed`` the summary and the first records that changed; for
    ``job.waiting_for_human`` what it asks and, with the console's base URL, the link that
    opens its live view with takeover.

    No result (it may be large; read it from the API) and nothing secret."""
    body: dict[str, Any] = {
        "event": event,
        "delivery_id": delivery,
        "job_id": job.job_id,
        "name": job.request.name,
        "status": job.status.value,
        "attempt": job.attempt,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at or job.updated_at,
        "correlation_id": job.correlation_id,
        "schedule_id": job.schedule_id,
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
    if job.human is not None and job.status.value == "waiting_for_human":
        body["human"] = job.human.model_dump(mode="json", exclude_none=True)
    if event == WAITING_FOR_HUMAN and console_url:
        body["console_url"] = job_live_link(console_url, job.job_id)
    if job.checkpoints:
        body["checkpoints"] = [c.model_dump(mode="json") for c in job.checkpoints]
    if event == CHANGED:
        body["changes"] = bounded_changes(
            job.changes, limit=CHANGED_RECORDS, max_bytes=CHANGED_MAX_BYTES
        )
    return body


class Outbox:
    """Queues a job's notification once (marked), to the webhook its ``notify`` names."""

    def __init__(
        self,
        queue: WebhookQueue,
        defaults: NotifyDefaults,
        deliveries: Deliveries,
        *,
        retention_s: int,
        console_url: str | None = None,
    ) -> None:
        self.queue = queue
        self.defaults = defaults
        self.deliveries = deliveries
        self.retention_s = retention_s
        self.console_url = console_url

    def post(
        self, job: JobRecord, topic: NotifyTopic, event: str, extra: dict[str, Any] | None = None
    ) -> None:
        self.post_all([(job, topic, event, extra)])

    def post_all(
        self, notices: Sequence[tuple[JobRecord, NotifyTopic, str, dict[str, Any] | None]]
    ) -> None:
        """Queue each ``(job, topic, event, extra)`` whose job's ``notify.on`` has ``topic``,
        in order; raises if SQS refused any (the accepted ones are marked)."""
        out: list[tuple[Mark, dict[str, Any]]] = []
        for job, topic, event, extra in notices:
            url = webhook_for(job, topic, self.defaults)
            if not url:
                continue
            delivery = delivery_id(job, event)
            expires_at = events_expire_at(job, self.retention_s)
            mark = Mark(job.tenant_id, job.job_id, f"webhook#{delivery}", expires_at)
            out.append((mark, self._message(job, url, delivery, event, expires_at, extra)))
        hand_on_once(self.deliveries, out, self.queue.send_many, "webhooks")

    def _message(
        self,
        job: JobRecord,
        url: str,
        delivery: str,
        event: str,
        expires_at: int,
        extra: dict[str, Any] | None,
    ) -> dict[str, Any]:
        body = {**payload(job, delivery, event, console_url=self.console_url), **(extra or {})}
        return {
            "tenant_id": job.tenant_id,
            "job_id": job.job_id,
            "delivery_id": delivery,
            "url": url,
            "job_status": job.status.value,
            "event": event,
            "expires_at": expires_at,
            # The exact bytes every attempt signs and sends.
            "body": json.dumps(body, separators=(",", ":")),
        }


class WebhookNotifier:
    """``ChangeConsumer``: queue a webhook for every notification a job's change makes."""

    name = "webhooks"

    def __init__(
        self,
        queue: WebhookQueue,
        defaults: NotifyDefaults,
        deliveries: Deliveries,
        *,
        retention_s: int,
        console_url: str | None = None,
    ) -> None:
        self.outbox = Outbox(
            queue, defaults, deliveries, retention_s=retention_s, console_url=console_url
        )

    def handle(self, changes: Sequence[JobChange]) -> None:
        notices = []
        for change in changes:
            for topic, event in job_events(change):
                assert change.new is not None
                notices.append((change.new, topic, event, None))
        self.outbox.post_all(notices)
