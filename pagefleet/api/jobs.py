"""A job's bodies: its view (status, attempts, artifacts, result), submit, cancel, resolve,
validate, the dead letters and the run events.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.record import Artifact, JobError, JobRecord, RunMetrics
from pagefleet.jobs.states import FINAL_STATES, JobStatus
from pagefleet.jobs.step_times import StepTime
from pagefleet.jobs.takeover import TakeoverView, shown
from pagefleet.live.events import RunEvent
from pagefleet.monitors.changes import Changes
from pagefleet.view import View


class ArtifactInfo(View):
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


class AttemptView(View):
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


class JobView(View):
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
    expires_at: int | None = Field(
        default=None,
        description=(
            "once the job has ended: when it is gone (epoch seconds, UTC), its record, events "
            "and artifacts, by its tenant's retention_days; from then on it is not found"
        ),
    )
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


class SubmitResponse(View):
    """202 to ``POST /v1/jobs``: the job's id and status, and the whole job."""

    job_id: str
    status: JobStatus
    job: JobView


class JobPage(View):
    """A page of jobs, newest first; pass ``next_cursor`` back to read the next one."""

    jobs: list[JobView]
    next_cursor: str | None = None


class ValidationProblem(View):
    """One thing ``POST /v1/jobs`` would refuse: the field, named as its 4xx bodies name it
    (``error.field`` and ``error.details[].field``: ``steps[0].url``, ``inputs.site``,
    ``body`` for the body as a whole), and why."""

    field: str
    message: str


class ValidationResult(View):
    """200 to ``POST /v1/jobs/validate``: every problem of the job request (none: valid)."""

    valid: bool
    errors: list[ValidationProblem] = Field(default_factory=list)


class ArtifactList(View):
    job_id: str
    artifacts: list[ArtifactLink]


class DeadLetter(JobView):
    """A dead-lettered job, with the tenant it belongs to (admin view)."""

    tenant_id: str


class DeadLetters(View):
    dead_letters: list[DeadLetter]


class RedriveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[str] | None = Field(
        default=None,
        max_length=1000,
        description="'tenant_id/job_id' of each job to redrive; omitted: every dead letter",
    )


class RedriveResponse(View):
    redriven: list[str] = Field(description="ids of the jobs sent back to their queue")


class EventPage(View):
    """A job's run events after ``after``, in order; pass ``next_after`` back for more."""

    job_id: str
    events: list[RunEvent]
    next_after: int = Field(description="the last seq returned (or the after given)")
    more: bool = Field(description="more events are stored after these")
