"""The REST API's contract: every response body, as typed models.

The API handlers serialize through these models, the OpenAPI document is generated from
them (``docs/openapi.json``), and the Python client (``pagefleet.client``) parses the
API's answers with the very same classes, so the three cannot drift apart.

Models read with ``extra="ignore"``: a client keeps working when a newer API adds a field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.models import Artifact, JobError, JobRecord, RunMetrics
from pagefleet.jobs.states import FINAL_STATES, JobStatus
from pagefleet.jobs.step_times import StepTime
from pagefleet.jobs.takeover import TakeoverView, shown
from pagefleet.live.events import RunEvent
from pagefleet.monitors.changes import Changes
from pagefleet.notify.ports import DeliveryAttempt
from pagefleet.targets.breakers import BreakerState, DomainStatus


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)


class HealthView(_View):
    """What ``GET /v1/health`` answers, with no API key: the deployed release and stage."""

    status: Literal["ok"] = Field(description="the API function answered")
    version: str = Field(description="the pagefleet release deployed (CHANGELOG.md)")
    stage: str = Field(description="the stage this API belongs to (dev, prod...)")


class ArtifactInfo(_View):
    """A file a job produced, with the sha256 it was stored with."""

    name: str
    size: int = Field(description="bytes")
    content_type: str
    sha256: str
    retention: str | None = Field(default=None, description="routine | debug")
    attempt: int | None = Field(default=None, description="the attempt that produced it")

    @classmethod
    def of(cls, artifact: Artifact) -> ArtifactInfo:
        return cls.model_validate(artifact.model_dump(exclude={"key"}))


class ArtifactLink(ArtifactInfo):
    """An artifact with a short-lived presigned download URL (no API key needed)."""

    url: str
    expires_in: int | None = Field(default=None, description="seconds the URL stays valid")


class AttemptView(_View):
    """One attempt of a job: who ran it, when, and how it ended."""

    attempt: int
    worker: str
    started_at: str
    finished_at: str | None = None
    status: JobStatus | None = None
    error: JobError | None = None
    metrics: RunMetrics | None = Field(
        default=None, description="its page's requests, and what the job's routes did to them"
    )
    steps: list[StepTime] = Field(
        default_factory=list,
        description="each top-level step as it ran: start, duration, outcome and its share of "
        "the job's price (the latest attempt's, its first 100 steps; the run events have "
        "every step of every attempt)",
    )


class JobView(_View):
    """A job as the API shows it: status, attempts, result, error, artifacts."""

    job_id: str
    status: JobStatus
    request: dict[str, Any] = Field(
        default_factory=dict, description="the submitted request, with defaults filled in"
    )
    created_at: str | None = None
    updated_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    enqueued_at: str | None = None
    correlation_id: str | None = None
    pool: str | None = None
    attempt: int = Field(default=0, description="attempts started so far")
    result: dict[str, Any] | None = Field(
        default=None,
        description="extracted values; null when too large to keep inline (see result_artifact)",
    )
    result_artifact: str | None = Field(
        default=None, description="artifact holding the whole result when it is not inline"
    )
    result_bytes: int | None = Field(default=None, description="size of the result as JSON")
    artifacts: list[ArtifactInfo] = Field(default_factory=list)
    error: JobError | None = None
    attempts: list[AttemptView] = Field(default_factory=list)
    cancel_requested_at: str | None = None
    deferred_reason: str | None = Field(default=None, description="why a queued job waits")
    run_at: int | None = Field(
        default=None, description="a scheduled job's start (epoch seconds, UTC)"
    )
    workflow: str | None = Field(default=None, description="the named workflow it ran")
    workflow_version: int | None = None
    schedule_id: str | None = Field(default=None, description="the schedule that made it")
    scheduled_time: str | None = None
    checkpoints: list[Checkpoint] = Field(
        default_factory=list,
        description="the word on each irreversible step the job reached (started, done...)",
    )
    compensation: Compensation | None = Field(
        default=None, description="the job's compensate steps, if they ran"
    )
    resolution: Resolution | None = Field(
        default=None, description="how a person resolved the job when it needed review"
    )
    human: HumanWait | None = Field(
        default=None,
        description="what a waiting_for_human job asks, and the person's answer once given",
    )
    takeover: TakeoverView | None = Field(
        default=None,
        description="the person holding the job's page (POST .../takeover): its steps wait "
        "until it is handed back or `until` passes without their input",
    )
    replay_of: str | None = Field(
        default=None, description="the job this offline replay replays (POST .../replay)"
    )
    replays: list[str] = Field(
        default_factory=list, description="this job's offline replays, oldest first"
    )
    changes: Changes | None = Field(
        default=None,
        description=(
            "a monitor's run against its baseline: each list cut to its first records "
            "(changes.json has them all); no baseline_job_id on a first run"
        ),
    )

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATES

    @property
    def name(self) -> str | None:
        value = self.request.get("name")
        return str(value) if value is not None else None

    @classmethod
    def of(cls, record: JobRecord) -> JobView:
        data = record.model_dump(
            mode="json", include=set(cls.model_fields) - {"artifacts", "attempts", "takeover"}
        )
        return cls.model_validate(
            {
                **data,
                "takeover": shown(record.takeover, final=record.status.is_final),
                "artifacts": [ArtifactInfo.of(a) for a in record.artifacts],
                "attempts": [a.model_dump(mode="json") for a in record.attempts],
                "replay_of": record.request.replay.job_id if record.request.replay else None,
            }
        )


class CancelResponse(JobView):
    """The job after a cancel: ``cancelled`` (200), or still ``running`` with
    ``cancel_requested_at`` set while its worker stops it (202)."""


class ResolveRequest(BaseModel):
    """``POST /v1/jobs/{id}/resolve``: whether the irreversible step took effect."""

    model_config = ConfigDict(
        extra="forbid", defer_build=True, validate_by_name=True, validate_by_alias=True
    )

    outcome: Literal["done", "not_done"] = Field(
        description=(
            "done: the step took effect (the job ends succeeded with the results it has); "
            "not_done: it did not (the job runs again from the start)"
        )
    )
    continue_: bool = Field(
        default=False,
        alias="continue",
        description=(
            "with done: run the steps after the irreversible one in a new attempt, for "
            "workflows whose following steps start with their own goto"
        ),
    )

    @model_validator(mode="after")
    def _continue_after_done(self) -> ResolveRequest:
        if self.continue_ and self.outcome != "done":
            raise ValueError("continue goes with outcome done (not_done runs the job again)")
        return self


class ResolveResponse(JobView):
    """The job after its resolution: ``succeeded``, or ``queued`` to run again."""


class SubmitResponse(_View):
    """202 to ``POST /v1/jobs``: the job's id and status, and the whole job."""

    job_id: str
    status: JobStatus
    job: JobView


class JobPage(_View):
    """A page of jobs, newest first; pass ``next_cursor`` back to read the next one."""

    jobs: list[JobView]
    next_cursor: str | None = None


class ValidationProblem(_View):
    """One thing ``POST /v1/jobs`` would refuse: the field, named as its 4xx bodies name it
    (``error.field`` and ``error.details[].field``: ``steps[0].url``, ``inputs.site``,
    ``body`` for the body as a whole), and why."""

    field: str
    message: str


class ValidationResult(_View):
    """200 to ``POST /v1/jobs/validate``: every problem of the job request (none: valid)."""

    valid: bool
    errors: list[ValidationProblem] = Field(default_factory=list)


class ArtifactList(_View):
    job_id: str
    artifacts: list[ArtifactLink]


class DeadLetter(JobView):
    """A dead-lettered job, with the tenant it belongs to (admin view)."""

    tenant_id: str


class DeadLetters(_View):
    dead_letters: list[DeadLetter]


class RedriveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[str] | None = Field(
        default=None,
        max_length=1000,
        description="'tenant_id/job_id' of each job to redrive; omitted: every dead letter",
    )


class RedriveResponse(_View):
    redriven: list[str] = Field(description="ids of the jobs sent back to their queue")


class OriginView(_View):
    """The circuit breakers of one origin (scheme, host, port). A tenant sees the shared
    breaker's state and next probe time, and its own breaker's; counts are for admins."""

    origin: str
    state: BreakerState = Field(description="the shared breaker (opens when several tenants fail)")
    next_probe_at: int | None = Field(
        default=None, description="epoch seconds when a probe job may run again (not closed)"
    )
    tenant_state: BreakerState = Field(
        default=BreakerState.CLOSED, description="the caller's own breaker on this origin"
    )
    tenant_next_probe_at: int | None = None
    # Admin key only.
    failures: int | None = None
    requests: int | None = None
    failing_tenants: int | None = None
    window_start: int | None = None
    opened_at: int | None = None

    @classmethod
    def of(
        cls, shared: DomainStatus, own: DomainStatus | None = None, *, detail: bool = False
    ) -> OriginView:
        view = cls(
            origin=shared.domain,
            state=shared.state,
            next_probe_at=shared.reopens_at,
            tenant_state=own.state if own else BreakerState.CLOSED,
            tenant_next_probe_at=own.reopens_at if own else None,
        )
        if detail:
            view = view.model_copy(
                update={
                    "failures": shared.failures,
                    "requests": shared.total,
                    "failing_tenants": shared.failing_tenants,
                    "window_start": shared.window_start,
                    "opened_at": shared.opened_at,
                }
            )
        return view


_RANK = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class DomainView(_View):
    """The circuit breakers of a target site's origins (``state``: the worst of them)."""

    domain: str
    state: BreakerState
    next_probe_at: int | None = None
    origins: list[OriginView] = Field(default_factory=list)

    @classmethod
    def of(cls, domain: str, origins: list[OriginView]) -> DomainView:
        worst = max(origins, key=lambda o: _RANK[o.state], default=None)
        return cls(
            domain=domain,
            state=worst.state if worst else BreakerState.CLOSED,
            next_probe_at=worst.next_probe_at if worst else None,
            origins=origins,
        )


class DomainList(_View):
    domains: list[DomainView]


class EventPage(_View):
    """A job's run events after ``after``, in order; pass ``next_after`` back for more."""

    job_id: str
    events: list[RunEvent]
    next_after: int = Field(description="the last seq returned (or the after given)")
    more: bool = Field(description="more events are stored after these")


class LiveInfo(_View):
    """Where and how to follow jobs live (README: "Follow a job live")."""

    url: str | None = Field(description="wss URL of the WebSocket API; null: not deployed")
    idle_timeout_s: int = Field(description="API Gateway closes a silent socket after this")
    max_age_s: int = Field(description="API Gateway closes every socket after this")
    ping_interval_s: int = Field(description='send {"action": "ping"} at least this often')


class LiveTicket(_View):
    """A single-use ticket to connect without a header (browsers): ``url?ticket=...``."""

    ticket: str
    expires_at: str
    expires_in: int
    url: str | None = Field(description="the live URL with this ticket, ready to open")


class DeliveryList(_View):
    job_id: str
    deliveries: list[DeliveryAttempt]


class NotifySettings(_View):
    """A tenant's default completion webhook (used when a job sets no ``notify``)."""

    webhook: str | None = None


class NotifySettingsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    webhook: str | None = Field(default=None, max_length=2000, description="null: none")


class SigningSecret(_View):
    """The tenant's webhook signing secret (HMAC-SHA256 key of ``Pagefleet-Signature``)."""

    secret: str


class ErrorDetail(_View):
    code: str = Field(description="machine-readable, e.g. validation_error, not_found")
    message: str
    field: str | None = Field(default=None, description="the field at fault, e.g. steps[0].url")
    details: list[dict[str, Any]] | None = None


class ErrorBody(_View):
    """Every 4xx and 5xx answer of the API."""

    error: ErrorDetail


class WorkflowVersionView(_View):
    """One immutable version of a named workflow."""

    name: str
    version: int
    created_at: str
    definition: dict[str, Any] = Field(description="steps, default inputs and options")
    versions: list[int] | None = Field(
        default=None, description="every version of the name (on the latest-version route)"
    )


class WorkflowDiff(_View):
    """Two versions of a workflow compared: a unified diff of their definitions, each as
    sorted, indented JSON (empty when they are the same)."""

    name: str
    from_version: int
    to_version: int
    diff: str
    changed: bool


class WorkflowStored(_View):
    """201 to ``PUT /v1/workflows/{name}``: the version the definition was stored as."""

    name: str
    version: int
    created_at: str


class WorkflowSummary(_View):
    name: str
    latest_version: int


class WorkflowList(_View):
    workflows: list[WorkflowSummary]


class PercentilesView(_View):
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class FleetStatsView(_View):
    """The tenant's fleet: what waits and runs now, how jobs ended in the window and how
    long they took (seconds)."""

    window_s: int
    counts: dict[str, int] = Field(
        description="jobs in each waiting or running state now, and in needs_review"
    )
    oldest_queued_age_s: float | None = Field(
        default=None, description="how long the oldest queued job has waited"
    )
    finished: dict[str, int] = Field(description="jobs that ended in the window, by state")
    success_rate: float | None = None
    failure_rate: float | None = None
    timeout_rate: float | None = None
    retry_rate: float | None = Field(
        default=None, description="share of ended jobs that needed more than one attempt"
    )
    duration_s: PercentilesView
    queue_delay_s: PercentilesView = Field(description="from ready to the first attempt's start")
    sampled: int = Field(description="jobs made in the window that the figures are taken from")


class McpAnswer(_View):
    """What ``POST /v1/mcp`` answers a JSON-RPC request: its result or its error (MCP's
    Streamable HTTP transport, JSON answers). A notification is answered 202, no body."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: int | str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
