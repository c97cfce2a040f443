"""What the API does with browser sessions: open, read, close, save as a workflow (the
steps are ``pagefleet.browsing.stepping``).

A session is a job (docs/decisions.md, 2026-12-01): opened through the tenant's admission
like any submission, claimed, leased and heartbeated by a worker, ended through the
lifecycle. A worker that stopped heartbeating is found out here (its lease taken back at
once) and reported as ``lost``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from pagefleet.browsing.answer_times import AnswerTimes
from pagefleet.browsing.commands import (
    CommandLedger,
    session_steps,
)
from pagefleet.browsing.inbox import SessionInbox, Wakeup
from pagefleet.browsing.models import (
    MAX_WAIT_S,
    OpenSession,
    SaveAsWorkflow,
    SavedWorkflow,
    SessionView,
)
from pagefleet.browsing.recording import parametrize
from pagefleet.browsing.status import refuse_ended, status_of
from pagefleet.errors import (
    InvalidField,
    JobNotCancellable,
    NotConfigured,
    NotFound,
    TooManyRequests,
)
from pagefleet.jobs.models import JobRequest, iso, new_ulid, utcnow
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices, get_job
from pagefleet.jobs.session_terms import SessionTerms
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.sweeper import session_lost
from pagefleet.jobs.takeover import shown
from pagefleet.pricing import Worker
from pagefleet.specs.resources import inbox_name, owner_worker
from pagefleet.tenancy.admission import Quotas, submit
from pagefleet.tenancy.sessions import SessionInfo
from pagefleet.tenancy.spend import cost_cap_s
from pagefleet.workflow import UseSession
from pagefleet.workflow.versions import WorkflowDefinition, put_version

# Open sessions whose request a process keeps (the oldest read is dropped first).
MAX_KEPT_SESSIONS = 1000
log = logging.getLogger("pagefleet.browsing")


@dataclass(frozen=True)
class Opened:
    """What the API keeps of an open session: its request, and its worker's inbox once a
    worker holds it (neither changes: a session has one attempt)."""

    request: JobRequest
    inbox: str | None


class SavedSessions(Protocol):
    """The tenants' saved login sessions, as far as opening one needs (SessionArchive)."""

    def info(self, tenant_id: str, name: str) -> SessionInfo | None: ...


@dataclass(frozen=True)
class Sessions:
    jobs: JobServices
    quotas: Quotas
    # Wakes the worker holding a session (None: no sessions in this deployment).
    inbox: SessionInbox | None
    # Each command's record: run once or expired, its answer, its steps (None: no sessions).
    commands: CommandLedger | None = None
    stage: str = "dev"  # names the workers' inboxes
    # The worker shape a session's browser-seconds are priced on (its cost so far, its cap).
    pricing: Worker = field(default_factory=Worker)
    presign_ttl_s: int = 300
    # A call waits at most this for its answer, whatever its wait_s (tests shorten it).
    max_wait_s: float = float(MAX_WAIT_S)
    # Told of each session found lost (the API counts them: the lost-sessions alarm).
    on_lost: Callable[[JobRecord], None] = lambda job: None
    # Where a session's use_session is looked up at open (None: left to its worker).
    saved: SavedSessions | None = None
    # How a call waiting for an answer reads the time and waits (tests pass their own).
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # Open sessions this process has read, by (tenant, session): see opened.
    _open: dict[tuple[str, str], Opened] = field(default_factory=dict, repr=False)
    # When this process found its sessions' answers, by kind of command (when to read).
    answer_times: AnswerTimes = field(default_factory=AnswerTimes, repr=False)

    def opened(self, tenant_id: str, session_id: str, *, known: bool = False) -> Opened:
        """An open session's request and its worker's inbox: read until a worker holds it,
        then kept by this process while the session is open (neither changes). ``known``:
        a session this process opened and has not seen held yet is answered as it was
        opened, without a read (its first step records its command before it reads the
        job: ``run_steps``). A session that ended is found out by its record after a call
        (``run_steps``)."""
        key = (tenant_id, session_id)
        kept = self._open.get(key)
        if kept is not None and (kept.inbox is not None or known):
            return kept
        job = get_session(self, tenant_id, session_id)
        refuse_ended(job)
        self._keep(key, Opened(job.request, self.inbox_of(job)))
        return self._open[key]

    def _keep(self, key: tuple[str, str], opened: Opened) -> None:
        self._open.pop(key, None)
        while len(self._open) >= MAX_KEPT_SESSIONS:
            self._open.pop(next(iter(self._open)))
        self._open[key] = opened

    def inbox_of(self, job: JobRecord) -> str | None:
        """The inbox of the worker holding the session (its lease owner's, set at claim)."""
        if job.status is not JobStatus.RUNNING or not job.lease_owner:
            return None
        return inbox_name(self.stage, owner_worker(job.lease_owner))

    def forget(self, tenant_id: str, session_id: str) -> None:
        self._open.pop((tenant_id, session_id), None)

    def presign(self, key: str) -> str:
        """A link to one of the session's artifacts, for as long as links last."""
        return self.jobs.artifacts.presign_get(key, self.presign_ttl_s)

    def require_commands(self) -> CommandLedger:
        if self.commands is None:
            raise NotConfigured("browser sessions are not configured in this deployment")
        return self.commands

    def require_inbox(self) -> SessionInbox:
        """The workers' inboxes, or 501 where this deployment has none."""
        if self.inbox is None:
            raise NotConfigured("browser sessions are not configured in this deployment")
        return self.inbox


def open_session(
    sessions: Sessions,
    tenant_id: str,
    body: OpenSession,
    *,
    correlation_id: str | None = None,
    opened: Callable[[JobRecord], object] | None = None,
) -> JobRecord:
    """Record and queue the session's job; 429 when the tenant's running slots are taken.
    Nothing else is made: an open that fails half way leaves only what ``submit`` undoes.
    ``opened``: told of the session once its job is recorded, while the job is queued (its
    audit record: one round trip less on the open's path)."""
    sessions.require_inbox()
    quotas = sessions.quotas
    limit = quotas.limits(tenant_id).max_running
    if len(quotas.view(tenant_id).running) >= limit:
        raise TooManyRequests(
            f"tenant {tenant_id} runs {limit} jobs or sessions already, its limit "
            "(max_running); close a session or wait for a job to end",
            headers={"Retry-After": "30"},
            limit="max_running",
            max_running=limit,
        )
    cap_s = None
    if body.max_cost_usd is not None:
        cap_s = cost_cap_s(body.max_cost_usd, sessions.pricing)
    terms = SessionTerms(
        idle_timeout_s=body.idle_timeout_s,
        max_duration_s=body.max_duration_s,
        max_cost_usd=body.max_cost_usd,
        cost_cap_s=cap_s,
    )
    steps: list[dict[str, Any]] = []
    if body.use_session is not None:
        check_saved(sessions, tenant_id, body.use_session)
        steps.append({"action": "use_session", "name": body.use_session})
    options = body.options.model_dump(mode="json", exclude_unset=True)
    # The deployment's and the tenant's pools, as for a job (422 on pool naming them).
    named = body.pool if "pool" in body.model_fields_set else None
    pool = sessions.jobs.policy.pool_for(tenant_id, None, named, body.pool)
    try:
        request = JobRequest.model_validate(
            {
                "name": body.name or "browser session",
                "pool": pool,
                "max_attempts": 1,  # a browser's state cannot be retried: a lost one is lost
                "steps": steps,
                "options": {**options, "job_timeout_s": body.max_duration_s},
                "session": terms.model_dump(),
            }
        )
    except ValidationError as exc:
        raise InvalidField.from_errors(exc.errors()) from None
    admitted = submit(
        sessions.jobs, quotas, tenant_id, request, correlation_id=correlation_id, alongside=opened
    )
    job = admitted.submitted.job
    # Its first step (often the next call, to this process) needs no read to begin.
    sessions._keep((tenant_id, job.job_id), Opened(job.request, None))
    return job


def check_saved(sessions: Sessions, tenant_id: str, name: str) -> None:
    """422 at open for a use_session that was never saved or has expired: its worker would
    fail it, after it took a running slot and a browser context."""
    if sessions.saved is None:
        return
    info = sessions.saved.info(tenant_id, name)
    if info is None or info.expired(sessions.jobs.lifecycle.now()):
        why = "has expired" if info is not None else "does not exist"
        raise InvalidField(
            f"the saved session {name!r} {why}; save one with a save_session step "
            "(GET /v1/sessions lists them)",
            field="use_session",
        )


def get_session(sessions: Sessions, tenant_id: str, session_id: str) -> JobRecord:
    """The session's job as it stands, its worker's lease taken back if it ran out."""
    job = get_job(sessions.jobs, tenant_id, session_id)
    if job.request.session is None:
        raise NotFound(f"browser session {session_id} not found")
    return _settled(sessions, job)


def _settled(sessions: Sessions, job: JobRecord) -> JobRecord:
    lifecycle = sessions.jobs.lifecycle
    now = int(lifecycle.now())
    if job.status is JobStatus.RUNNING and (job.lease_expires_at or 0) < now:
        # Its worker stopped heartbeating: nobody will answer. One attempt only, so the
        # sweeper's move fails it (lease_expired), and the session reads `lost` from now on.
        taken = lifecycle.take_back_job(job, expired_before=now)
        lost = session_lost(job, taken)
        job = sessions.jobs.store.get(job.tenant_id, job.job_id)
        if lost:
            sessions.on_lost(job)
    return job


def view(sessions: Sessions, job: JobRecord, *, with_steps: bool = True) -> SessionView:
    status, reason = status_of(job)
    terms = job.request.session
    assert terms is not None
    steps: list[dict[str, Any]] | None = None
    if with_steps:
        steps = recorded_steps(sessions, job)
    return SessionView(
        session_id=job.job_id,
        status=status,
        job_status=job.status.value,
        closed_reason=reason,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        idle_timeout_s=terms.idle_timeout_s,
        max_duration_s=terms.max_duration_s,
        steps=steps,
        error=job.error.model_dump(exclude_none=True) if job.error is not None else None,
        takeover=shown(job.takeover, final=job.status.is_final),
    )


def recorded_steps(sessions: Sessions, job: JobRecord) -> list[dict[str, Any]]:
    """The steps that succeeded, in order: from the command ledger, where each was made
    durable as it was answered (however the session ended, however many there were)."""
    return session_steps(sessions.require_commands(), job.tenant_id, job.job_id)


def close_session(sessions: Sessions, tenant_id: str, session_id: str) -> JobRecord:
    """End the session (a cancel of its job); a closed one is answered as it is."""
    sessions.forget(tenant_id, session_id)
    job = get_session(sessions, tenant_id, session_id)
    if job.status.is_final:
        return job
    inbox = sessions.inbox_of(job)
    if inbox is not None:
        # The close wake-up is taken at once; the cancel flag is the fallback the runner
        # watches whatever the session is doing.
        close = Wakeup(id=new_ulid(), op="close", tenant_id=tenant_id, session_id=session_id)
        sessions.require_inbox().send(inbox, close)
    # The worker may end it first, on the close wake-up: a close is idempotent.
    with contextlib.suppress(JobNotCancellable):
        sessions.jobs.lifecycle.cancel(tenant_id, session_id)
    return get_session(sessions, tenant_id, session_id)


def save_as_workflow(
    sessions: Sessions, tenant_id: str, session_id: str, body: SaveAsWorkflow
) -> SavedWorkflow:
    """The steps that succeeded, as the next version of the named workflow."""
    workflows = sessions.jobs.workflows
    if workflows is None:
        raise NotConfigured("named workflows are not available here")
    job = get_session(sessions, tenant_id, session_id)
    steps = recorded_steps(sessions, job)
    if not steps:
        raise InvalidField("the session has no step that succeeded to save", field="name")
    leading = [s for s in job.request.steps if isinstance(s, UseSession)]
    raw = [s.model_dump(mode="json", exclude_none=True) for s in leading] + steps
    templated = parametrize(raw, body.inputs)
    options = job.request.options.model_dump(mode="json", exclude_defaults=True)
    options.pop("job_timeout_s", None)  # the session's max duration, not the workflow's
    try:
        definition = WorkflowDefinition(
            description=body.description,
            steps=templated,  # validated here
            inputs=dict(body.inputs),
            options=options,
        )
    except ValidationError as exc:
        raise InvalidField.from_errors(exc.errors()) from None
    saved = put_version(workflows, tenant_id, body.name, definition, iso(utcnow()))
    return SavedWorkflow(
        name=saved.name, version=saved.version, steps=len(templated), inputs=dict(body.inputs)
    )
