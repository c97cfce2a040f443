"""A schedule's run as a job: the one way both the Scheduler's fire (``functions/scheduler``)
and ``POST /v1/schedules/{id}/run`` submit it, and the check its job passes when the schedule
is made or changed.

Both go through the planning path (``jobs.planning``), so a run is refused for what a
``POST /v1/jobs`` of the same job would be (its webhook's address, an ``evaluate`` step the
tenant may not run, a workflow that is gone). They differ only in the tenant's limits: a run
started by hand is a submission like any other (the rate and queued limits), a fire is the
tenant's standing plan (not held to them, but counted queued, as it is taken off when it
starts).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from pagefleet.errors import InvalidField, InvalidRequest
from pagefleet.jobs import planning
from pagefleet.jobs.service import JobServices, Submitted, submit_job
from pagefleet.jobs.submission import JobSubmission
from pagefleet.schedules.service import within_job
from pagefleet.tenancy import admission
from pagefleet.tenancy.admission import Quotas

log = logging.getLogger("pagefleet.schedules")


def job_submission(job: dict[str, Any], *, within: tuple[str, ...] = ("job",)) -> JobSubmission:
    """A schedule's job as a submission; ``InvalidField`` naming ``job.<path>``."""
    try:
        return JobSubmission.model_validate(job)
    except ValidationError as exc:
        raise InvalidField.from_errors(exc.errors(), within=within) from None


def check_job(svc: JobServices, tenant_id: str, job: dict[str, Any]) -> None:
    """Refuse a schedule's job now that each of its runs would be refused for."""
    planning.check_job(svc, tenant_id, job_submission(job, within=()))


def submit_run(
    svc: JobServices,
    quotas: Quotas,
    tenant_id: str,
    schedule: tuple[str, str],
    job: dict[str, Any],
    *,
    idempotency_key: str | None,
    by_hand: bool,
) -> Submitted:
    """Submit one run of a schedule: ``schedule`` is (schedule id, scheduled time).

    A refusal names the field as the schedule's request does (``job.notify.webhook``)."""
    schedule_id, scheduled_time = schedule
    correlation = f"schedule-{schedule_id}-{scheduled_time}"
    try:
        submission = job_submission(job)
        if by_hand:
            return admission.submit(
                svc,
                quotas,
                tenant_id,
                submission,
                idempotency_key=idempotency_key,
                correlation_id=correlation,
                schedule=schedule,
            ).submitted
        submitted = submit_job(
            svc,
            tenant_id,
            submission,
            idempotency_key=idempotency_key,
            correlation_id=correlation,
            schedule=schedule,
        )
    except InvalidRequest as exc:
        raise within_job(exc) from None
    if submitted.created:
        try:
            quotas.count_queued(tenant_id)
        except Exception:  # the job is recorded and queued: a count off by one, not a lost run
            log.warning("queued count not updated for a scheduled job", exc_info=True)
    return submitted
