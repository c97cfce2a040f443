"""What a submission becomes before it is recorded: every check, then the job's first record.

``POST /v1/jobs`` stops at the first problem (raised as the error its status says); ``POST
/v1/jobs/validate`` runs the same checks, collects every problem and records nothing. Both go
through ``plan_job`` so that what validate accepts, submit accepts (but for the tenant's rate
and queued limits, which only a submission spends).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from pagefleet.errors import InvalidField, InvalidRequest, NotFound, RequestTooLarge, field_path
from pagefleet.jobs.models import MAX_DELAY_SECONDS, JobRequest, JobSettings, iso, new_job_id
from pagefleet.jobs.ports import Clock, JobStore
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.record_size import (
    SUBMIT_RECORD_MAX_BYTES,
    irreversible_reserve_bytes,
    json_bytes,
)
from pagefleet.jobs.rules import MAX_DELAY_S
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission, Resolved, resolve_submission
from pagefleet.jobs.submit_policy import SubmitPolicy
from pagefleet.workflow.versions import WorkflowStore


class Sources(Protocol):
    """What the checks read (``JobServices`` has them)."""

    @property
    def store(self) -> JobStore: ...

    @property
    def workflows(self) -> WorkflowStore | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def policy(self) -> SubmitPolicy: ...


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a submission: the field (as the 4xx bodies name it) and why."""

    field: str
    message: str


class Problems:
    """Where the checks report: raise the first (submit) or collect them all (validate)."""

    def __init__(self, *, collect: bool) -> None:
        self.collect = collect
        self.found: list[Problem] = []

    def add(self, error: InvalidRequest) -> None:
        if not self.collect:
            raise error
        listed = error.details.get("details")
        if isinstance(listed, list) and listed:
            self.found += [Problem(str(d["field"]), str(d["reason"])) for d in listed]
        else:
            self.found.append(Problem(error.field or "body", error.message))


@dataclass(frozen=True)
class Planned:
    record: JobRecord
    dispatch_at: int | None  # a scheduled job's message is sent by the sweeper from then


def plan_job(
    svc: Sources,
    tenant_id: str,
    submission: JobSubmission | JobRequest,
    problems: Problems,
    *,
    idempotency_key: str | None = None,
    correlation_id: str | None = None,
    schedule: tuple[str, str] | None = None,
) -> Planned | None:
    """The job's first record and when its message goes, or None with ``problems`` told."""
    resolved = None
    try:
        resolved = resolve_submission(submission, tenant_id, svc.workflows)
    except InvalidRequest as error:
        problems.add(error)
    now_epoch = int(svc.clock.now())
    # From the next whole second: a delay never starts the job sooner than asked.
    run_at = None
    try:
        run_at = _start(submission, math.ceil(svc.clock.now()))
    except InvalidRequest as error:
        problems.add(error)
    if submission.depends_on:
        if submission.delay_seconds or submission.run_at is not None:
            problems.add(
                InvalidField(
                    "a job with depends_on starts when its parents succeed; drop "
                    "delay_seconds and run_at",
                    field="depends_on",
                )
            )
        _check_parents(svc, tenant_id, submission.depends_on, problems)
    keyless = resolved is not None and idempotency_key is None
    if keyless and resolved is not None and resolved.request.uses_job_field("idempotency_key"):
        problems.add(
            InvalidField(
                "the workflow uses {{job.idempotency_key}}: submit it with an "
                "Idempotency-Key header (or use {{job.id}})",
                field="steps",
            )
        )
    request = _allowed(svc.policy, tenant_id, resolved, submission, problems) if resolved else None
    if resolved is None or request is None or problems.found:
        return None
    status, dispatch_at = JobStatus.QUEUED, None
    if submission.depends_on:
        status = JobStatus.WAITING
    elif run_at is not None and run_at > now_epoch:
        status = JobStatus.SCHEDULED
        if run_at - now_epoch > MAX_DELAY_S:
            dispatch_at = run_at - MAX_DELAY_S  # the sweeper sends it when within reach
    now = iso(datetime.fromtimestamp(svc.clock.now(), UTC))
    version = resolved.workflow
    request = svc.policy.with_trace(tenant_id, request)
    record = JobRecord(
        tenant_id=tenant_id,
        job_id=new_job_id(),
        status=status,
        request=request,
        created_at=now,
        updated_at=now,
        correlation_id=correlation_id or str(uuid.uuid4()),
        pool=request.pool,
        idempotency_key=idempotency_key,
        deadline_at=int(request.deadline.timestamp()) if request.deadline else None,
        run_at=run_at if status is JobStatus.SCHEDULED else None,
        workflow=version.name if version else None,
        workflow_version=version.version if version else None,
        schedule_id=schedule[0] if schedule else None,
        scheduled_time=schedule[1] if schedule else None,
    )
    size = json_bytes(record.model_dump(mode="json"))
    allowed = SUBMIT_RECORD_MAX_BYTES - irreversible_reserve_bytes(request)
    if size > allowed:
        # Refused now rather than once its attempts have run and it no longer fits one item.
        problems.add(
            RequestTooLarge(
                f"the job's record would take {size} bytes, over the {allowed} "
                "a job may use for its request; send fewer or smaller steps or inputs",
                field="body",
            )
        )
        return None
    return Planned(record, dispatch_at)


def validate_body(
    svc: Sources,
    tenant_id: str,
    body: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
) -> list[Problem]:
    """Every problem ``POST /v1/jobs`` would answer for ``body``, without recording a job:
    the model's (all of them), then, if it parses, the checks that need the tenant's data."""
    try:
        submission = JobSubmission.model_validate(body)
    except ValidationError as exc:
        return [
            Problem(field_path(e.get("loc", ())), str(e.get("msg", "invalid")))
            for e in exc.errors()
        ]
    problems = Problems(collect=True)
    plan_job(svc, tenant_id, submission, problems, idempotency_key=idempotency_key)
    return problems.found


def check_job(svc: Sources, tenant_id: str, submission: JobSubmission) -> None:
    """Raise the first problem a job made later from ``submission`` would be refused for
    now (a schedule's job, when the schedule is made or changed): its workflow and inputs,
    and the submission policy. Times and parents are a run's, checked when it is made."""
    resolved = resolve_submission(submission, tenant_id, svc.workflows)
    named = resolved.workflow is not None
    _apply_policy(svc.policy, tenant_id, resolved.request, Problems(collect=False), named=named)
    _routed(svc.policy, tenant_id, resolved.request, submission)


def _allowed(
    policy: SubmitPolicy,
    tenant_id: str,
    resolved: Resolved,
    submission: JobSubmission | JobRequest,
    problems: Problems,
) -> JobRequest | None:
    """The submission policy applied (each problem told to ``problems``), then the request
    routed to its pool with its spend cap priced: the request to record, or None."""
    _apply_policy(
        policy, tenant_id, resolved.request, problems, named=resolved.workflow is not None
    )
    try:
        return policy.with_cost_cap(_routed(policy, tenant_id, resolved.request, submission))
    except InvalidRequest as error:
        problems.add(error)
        return None


def _routed(
    policy: SubmitPolicy,
    tenant_id: str,
    request: JobRequest,
    submission: JobSubmission | JobRequest,
) -> JobRequest:
    """The request with the pool it runs in (``SubmitPolicy.pool_for``: the one it named,
    or its ``requires`` routed among its tenant's pools). Raises ``InvalidField``."""
    named = request.pool if "pool" in submission.model_fields_set else None
    pool = policy.pool_for(tenant_id, request.requires, named, request.pool)
    return request if pool == request.pool else request.model_copy(update={"pool": pool})


def _apply_policy(
    policy: SubmitPolicy, tenant_id: str, request: JobRequest, problems: Problems, *, named: bool
) -> None:
    """The submission policy's rules (``submit_policy``), each problem told to ``problems``."""
    webhook = request.notify.webhook if request.notify else None
    checks: list[Callable[[], None]] = []
    if webhook:
        checks.append(lambda: policy.check_webhook(webhook))
    checks.append(lambda: policy.check_steps(tenant_id, request.steps, named=named))
    if request.compensate:
        compensate = request.compensate
        checks.append(lambda: policy.check_steps(tenant_id, compensate, field="compensate"))
    for check in checks:
        try:
            check()
        except InvalidRequest as error:
            problems.add(error)


def _start(settings: JobSettings, now: int) -> int | None:
    """The job's start time in epoch seconds, from delay_seconds or run_at (None: now)."""
    if settings.deadline is not None and int(settings.deadline.timestamp()) <= now:
        raise InvalidRequest("deadline is in the past", field="deadline")
    if settings.delay_seconds:
        start: int | None = now + settings.delay_seconds
    elif settings.run_at is not None:
        start = int(settings.run_at.timestamp())
        if start > now + MAX_DELAY_SECONDS:
            raise InvalidField("run_at is more than 7 days ahead", field="run_at")
    else:
        start = None
    deadline = int(settings.deadline.timestamp()) if settings.deadline is not None else None
    if start is not None and deadline is not None and deadline < start:
        raise InvalidField("the deadline falls before the job's start", field="deadline")
    return start


def _check_parents(svc: Sources, tenant_id: str, parents: list[str], problems: Problems) -> None:
    for index, parent in enumerate(parents):
        try:
            svc.store.get(tenant_id, parent, consistent=False)
        except NotFound:
            problems.add(InvalidField(f"job {parent} not found", field=f"depends_on[{index}]"))
