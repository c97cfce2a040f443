"""What the API answers about a job's run: its events (``GET /v1/jobs/{id}/events``), and
the few it writes itself (``append_event``)."""

from __future__ import annotations

from typing import Any

from pagefleet.errors import NotFound
from pagefleet.jobs.ports import JobStore
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.rules import gone
from pagefleet.live.events import UNBOUNDED_TYPES, EventType, events_expire_at, now_iso
from pagefleet.live.numbers import numbers_of
from pagefleet.live.ports import EventStore

PAGE_MAX = 1000


def list_events(
    jobs: JobStore,
    events: EventStore,
    tenant_id: str,
    job_id: str,
    *,
    after: int,
    limit: int,
    now: int,
) -> tuple[list[dict[str, Any]], bool]:
    """The job's events after ``after`` and whether more follow; ``NotFound`` for a job
    that is not the tenant's (or no longer exists, or is past its retention: its events
    expire with it)."""
    if gone(jobs.get(tenant_id, job_id, consistent=False), now):
        raise NotFound(f"job {job_id} not found", job_id=job_id)
    return events.page(tenant_id, job_id, after=after, limit=min(limit, PAGE_MAX), now=now)


def append_event(
    jobs: JobStore,
    events: EventStore,
    job: JobRecord,
    event_type: EventType,
    *,
    at: float,
    **fields: Any,
) -> dict[str, Any]:
    """Write one run event of ``job`` from outside its worker (a takeover's moves, made by
    the API): numbered from the job's counter like the worker's, so followers see it in
    order with them."""
    event: dict[str, Any] = {"at": now_iso(at), "type": event_type.value, "attempt": job.attempt}
    event.update((name, value) for name, value in fields.items() if value is not None)
    expires_at = events_expire_at(job)
    bounded = 0 if event_type in UNBOUNDED_TYPES else 1
    numbers = numbers_of(job, jobs, events)
    first, _ = numbers(job.tenant_id, job.job_id, count=1, bounded=bounded, expires_at=expires_at)
    event["seq"] = first
    events.put(job.tenant_id, job.job_id, [event], expires_at=expires_at, attempt=job.attempt)
    return event
