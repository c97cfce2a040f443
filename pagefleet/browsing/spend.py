"""What a browser session has cost so far, and the tenant's open sessions with it.

A session is priced as a job is (``pagefleet.tenancy.spend``): the same figure a session's
``max_cost_usd`` is held to.
"""

from __future__ import annotations

from pagefleet.browsing.commands import CommandLedger, CommandState
from pagefleet.browsing.models import OpenSessionView, OpenStatus
from pagefleet.browsing.status import status_of
from pagefleet.errors import NotFound
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices, list_jobs
from pagefleet.jobs.states import JobStatus
from pagefleet.pricing import Worker
from pagefleet.tenancy.admission import Quotas
from pagefleet.tenancy.spend import cost_usd

Listed = OpenStatus
# Sessions still starting that a listing reads at most (a tenant queues few: max_queued).
MAX_STARTING = 100


def browser_seconds(job: JobRecord, now: float) -> float:
    """How long the session has held a browser (0 until a worker took it)."""
    if job.started_at is None:
        return 0.0
    end = epoch_of_iso(job.finished_at) if job.finished_at else now
    return max(0.0, end - epoch_of_iso(job.started_at))


def open_sessions(
    svc: JobServices,
    quotas: Quotas,
    ledger: CommandLedger,
    pricing: Worker,
    tenant_id: str,
    status: Listed,
) -> list[OpenSessionView]:
    """The tenant's sessions still open (``starting``, ``ready``, or both), newest first,
    each with its cost so far and its last activity (its last command, or its start)."""
    found: list[JobRecord] = []
    if status in ("open", "ready"):
        for job_id in quotas.view(tenant_id).running:
            try:
                job = svc.store.get(tenant_id, job_id)
            except NotFound:
                continue  # deleted since: its slot is the lifecycle's to give back
            if job.request.session is not None:
                found.append(job)
    if status in ("open", "starting"):
        page = list_jobs(svc, tenant_id, status=JobStatus.QUEUED, limit=MAX_STARTING)
        found += [j for j in page.jobs if j.request.session is not None]
    now = svc.lifecycle.now()
    out = []
    for job in found:
        shown, _ = status_of(job)
        if shown not in ("starting", "ready", "waiting_for_human") or (
            status != "open" and shown != status
        ):
            continue
        terms = job.request.session
        assert terms is not None
        out.append(
            OpenSessionView(
                session_id=job.job_id,
                name=job.request.name,
                status=shown,
                created_at=job.created_at,
                started_at=job.started_at,
                last_activity_at=last_activity(ledger, job),
                idle_timeout_s=terms.idle_timeout_s,
                max_duration_s=terms.max_duration_s,
                max_cost_usd=terms.max_cost_usd,
                cost_usd=round(cost_usd(browser_seconds(job, now), pricing), 6),
            )
        )
    out.sort(key=lambda v: v.session_id, reverse=True)
    return out


def last_activity(ledger: CommandLedger, job: JobRecord) -> str | None:
    """The time of the session's last command (sent), else when it started."""
    times = [
        c.created_at
        for c in ledger.session_commands(job.tenant_id, job.job_id)
        if c.state is not CommandState.EXPIRED
    ]
    latest = max(times, default=None)
    return latest or job.started_at
