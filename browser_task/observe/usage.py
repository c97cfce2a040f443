"""What an attempt used, measured by the worker and recorded for its tenant.

Browser-seconds are the attempt's slot time from its claim (the record's ``started_at``)
to its outcome, the same span the job's attempt log shows; requests are those the page made
(every one the browser sent, counted on the context); artifacts are what was uploaded.
Recording is idempotent per (job, attempt) (``pagefleet.tenancy.ports.UsageStore``), so a
retried write never counts twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.models import iso
from pagefleet.jobs.record import JobRecord
from pagefleet.tenancy.usage import UNNAMED, AttemptUsage, day_of


@dataclass
class AttemptMeter:
    """Counts what the browser does for one attempt (fed by the context's events)."""

    page_requests: int = 0

    def on_request(self, _request: Any) -> None:
        self.page_requests += 1


def _epoch(at: str) -> float:
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def workflow_of(job: JobRecord) -> str:
    """The name usage is kept under: the job's workflow (its name), else ``(unnamed)``."""
    named = getattr(job, "workflow", None) or job.request.name
    return str(named)[:100] if named else UNNAMED


def attempt_usage(
    job: JobRecord, outcome: Outcome | None, meter: AttemptMeter, *, ended: float
) -> AttemptUsage:
    started = _epoch(job.started_at) if job.started_at else ended
    artifacts = outcome.artifacts if outcome is not None else []
    return AttemptUsage(
        tenant_id=job.tenant_id,
        job_id=job.job_id,
        attempt=job.attempt,
        workflow=workflow_of(job),
        day=day_of(ended),
        first_attempt=job.attempt == 1,
        browser_seconds=round(max(0.0, ended - started), 3),
        page_requests=meter.page_requests,
        artifact_bytes=sum(a.size for a in artifacts),
        artifact_puts=len(artifacts),
        status=outcome.status.value if outcome is not None else "lease_lost",
        ended_at=iso(datetime.fromtimestamp(ended, UTC)),
    )
