"""What the API answers about a job's run: its events (``GET /v1/jobs/{id}/events``)."""

from __future__ import annotations

from typing import Any

from pagefleet.jobs.ports import JobStore
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
    that is not the tenant's (or no longer exists: its events expire with it)."""
    jobs.get(tenant_id, job_id, consistent=False)
    return events.page(tenant_id, job_id, after=after, limit=min(limit, PAGE_MAX), now=now)
