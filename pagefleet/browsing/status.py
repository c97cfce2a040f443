"""A browser session's status, read from its job (a session is a job: docs/decisions.md,
2026-12-01)."""

from __future__ import annotations

from pagefleet.browsing.models import SessionStatus
from pagefleet.errors import SessionEnded
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.spend import COST_CAP_KIND
from pagefleet.jobs.states import JobStatus

STARTING = frozenset({JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.RETRY_SCHEDULED})


def status_of(job: JobRecord) -> tuple[SessionStatus, str | None]:
    """A session's status and why it closed, read from its job."""
    status = job.status
    if status in STARTING:
        return "starting", None
    if status is JobStatus.RUNNING:
        return "ready", None
    if status is JobStatus.WAITING_FOR_HUMAN:
        return "waiting_for_human", None
    if status is JobStatus.DEAD_LETTERED or (
        status is JobStatus.FAILED and job.error is not None and job.error.kind == "lease_expired"
    ):
        return "lost", None
    if status is JobStatus.SUCCEEDED:
        return "closed", str((job.result or {}).get("closed_reason") or "closed")
    if job.error is not None and job.error.kind == COST_CAP_KIND:
        return "closed", "cost_cap"
    reasons = {
        JobStatus.CANCELLED: "closed",
        JobStatus.TIMED_OUT: "max_duration",
        JobStatus.EXPIRED: "expired",
    }
    return "closed", reasons.get(status, "failed")


def refuse_ended(job: JobRecord) -> None:
    """409 for a session that is closed or lost, or closing: deleted while it ran (its
    worker is winding it down and answers no step)."""
    status, _ = status_of(job)
    if status not in ("closed", "lost") and job.cancel_requested_at is not None:
        status = "closed"
    if status in ("closed", "lost"):
        raise SessionEnded(f"browser session {job.job_id} is {status}", status=status)
