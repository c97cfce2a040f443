"""A job's record as it runs (attempts, result, artifacts, error) and its queue message.

The request it was submitted with is ``pagefleet.jobs.models.JobRequest``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from pagefleet.jobs.checkpoints import Checkpoint, Compensation, Resolution
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.models import JobRequest, epoch_of_iso
from pagefleet.jobs.preview import Preview, carried, preview_of
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.step_times import StepTime
from pagefleet.jobs.takeover import Takeover
from pagefleet.monitors.changes import Changes
from pagefleet.specs.resources import Priority, queue_key


class Artifact(BaseModel):
    model_config = ConfigDict(defer_build=True)
    name: str
    key: str
    size: int
    content_type: str
    sha256: str
    retention: str = "routine"
    attempt: int = 1


class JobError(BaseModel):
    """Why an attempt failed, in words a user can act on."""

    model_config = ConfigDict(defer_build=True)

    kind: str  # e.g. step_failed, timeout, browser_crashed, lease_lost
    message: str
    retryable: bool = False
    step_index: int | None = None
    step: str | None = None
    timeout: str | None = None  # navigation | action | job | lease | deadline
    # Each problem by itself, e.g. a data_quality failure's {"path": "result.products",
    # "reason": "has 0 items, expected at least 1"}.
    details: list[dict[str, Any]] | None = None


class RunMetrics(BaseModel):
    """What an attempt's page asked of the network, and what the job's routes did with it."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    requests: int | None = Field(default=None, description="requests the page made")
    blocked: int = Field(default=0, description="aborted by options.block")
    routed: int = Field(default=0, description="aborted or answered by a route step")
    route_refused: int = Field(
        default=0, description="matched a route step, refused by the egress policy"
    )


class AttemptRecord(BaseModel):
    model_config = ConfigDict(defer_build=True)
    attempt: int
    worker: str
    started_at: str
    finished_at: str | None = None
    status: JobStatus | None = None
    error: JobError | None = None
    # Kept for a job that routes or blocks requests (options.block, route steps).
    metrics: RunMetrics | None = None
    # Its top-level steps' times and costs: the latest attempt's only (jobs.step_times).
    steps: list[StepTime] = Field(default_factory=list)


class JobRecord(BaseModel):
    model_config = ConfigDict(defer_build=True)
    tenant_id: str
    job_id: str
    status: JobStatus
    request: JobRequest
    created_at: str
    updated_at: str
    correlation_id: str
    pool: str
    attempt: int = 0
    lease_owner: str | None = None
    lease_expires_at: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    enqueued_at: str | None = None
    result: dict[str, Any] | None = None
    # A result too large to keep in the record lives only in this artifact (data.json).
    result_artifact: str | None = None
    result_bytes: int | None = None
    artifacts: list[Artifact] = Field(default_factory=list)
    error: JobError | None = None
    attempts: list[AttemptRecord] = Field(default_factory=list)
    idempotency_key: str | None = None
    # Epoch seconds of request.deadline, kept flat so conditions can compare it.
    deadline_at: int | None = None
    cancel_requested_at: str | None = None
    retry_at: int | None = None
    # Attempts spent before the last redrive; a redriven job gets its full retry budget back.
    attempt_base: int = 0
    # Times a worker stopped heartbeating this job since its last redrive (its lease taken
    # back): at rules.LEASES_LOST_LIMIT it is dead-lettered, a job that may kill its worker.
    leases_lost: int = 0
    # Why a queued job is waiting (e.g. its target's circuit is open).
    deferred_reason: str | None = None
    # A deferred job's successor message (its MessageId, written once it was sent) and
    # when it becomes visible (epoch s): until then any other message of the job (a second
    # copy, SQS delivers some twice, and its line) is dropped, not deferred into another.
    deferred_to: str | None = None
    deferred_due: int | None = None
    # Set by DELETE /v1/jobs/{id} on a running job: deleted once it has stopped.
    delete_requested_at: str | None = None
    # Epoch seconds from which the job is gone (DynamoDB's TTL attribute), set once it has
    # ended (pagefleet.tenancy.retention). TTL deletes days later and reads return the item
    # until then: a reader past it takes the job as gone (rules.gone).
    expires_at: int | None = None
    # Epoch seconds a scheduled job may start (from delay_seconds / run_at).
    run_at: int | None = None
    # The named workflow version the steps came from, and the schedule that made the job.
    workflow: str | None = None
    workflow_version: int | None = None
    schedule_id: str | None = None
    scheduled_time: str | None = None
    # Irreversible steps (docs/irreversible-steps.md): the word on each, the compensation
    # and a person's resolution of a job in review.
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    compensation: Compensation | None = None
    resolution: Resolution | None = None
    # A monitor's run compared with its baseline (pagefleet.monitors.changes).
    changes: Changes | None = None
    # The person a waiting_for_human job asks (pagefleet.jobs.human); kept after it goes on.
    human: HumanWait | None = None
    # The offline replays of this job (their ids, oldest first; request.replay links back).
    replays: list[str] = Field(default_factory=list)
    # A person holding its page (pagefleet.jobs.takeover); past its until, held by no one.
    takeover: Takeover | None = None
    # The job's run-event counter: the last number reserved, and the bounded events reserved
    # (pagefleet.live.numbers). Each claim reserves an attempt's first numbers in its own
    # write. None: a job recorded before the counter lived here, numbered from its own item.
    events_seq: int | None = 0
    events_bounded: int = 0

    @property
    def attempts_used(self) -> int:
        return self.attempt - self.attempt_base

    @property
    def events_on_record(self) -> bool:
        """Whether the job's run-event counter is on this record: every job recorded since it
        moved there, unless a worker of the version before claimed it (during the rollout
        that brought the counter: that claim reserved nothing on the record, and its attempt
        numbered its events from the job's own counter item, where the job's next ones must
        go on; ``pagefleet.live.numbers``)."""
        seq = self.events_seq
        return seq is not None and (seq > 0 or self.attempt == 0)

    def preview(self) -> Preview:
        """What the worker needs of this job before its next claim (``pagefleet.jobs.preview``):
        that claim makes the next attempt of its budget."""
        return preview_of(
            self.request, attempt=self.attempts_used + 1, events_on_record=self.events_on_record
        )

    def spend_left_s(self) -> float:
        """The browser-seconds this attempt may spend of its ``max_cost_usd`` (inf: the job
        set no cap): the cap (``pagefleet.jobs.spend.CostCap``) less what the attempts
        before it spent."""
        cap = self.request.cost_cap
        if cap is None:
            return math.inf
        earlier = [a for a in self.attempts if a.attempt < self.attempt]
        # An attempt whose worker died before it ended has no end: its time is not known.
        seconds = sum(
            max(0.0, epoch_of_iso(a.finished_at) - epoch_of_iso(a.started_at))
            for a in earlier
            if a.finished_at is not None
        )
        return cap.left_s(len(earlier), seconds)


class JobMessage(BaseModel):
    """The queue message: ids, and what the worker needs before the claim when that says
    nothing of the workflow (``pagefleet.jobs.preview``). The workflow stays in the record."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    tenant_id: str
    job_id: str
    attempt: int
    correlation_id: str
    pool: str
    priority: Priority = "normal"
    # How often this job was deferred in a row (its tenant at its running limit): the next
    # deferral waits longer, so a deep backlog does not spin through the queue.
    deferrals: int = 0
    # None: the worker reads the record before the claim (see ``preview_carried``).
    preview: Preview | None = None

    @field_validator("preview", mode="wrap")
    @classmethod
    def _preview_or_none(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A preview this version cannot read (an option a newer API added, during a
        rollout) is no preview: the worker reads the record, and the message stays a job's."""
        try:
            return handler(value)
        except ValidationError:
            return None

    @model_serializer(mode="wrap")
    def _ids_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("deferrals"):
            data.pop("deferrals", None)  # a message that was never deferred stays ids only
        if data.get("preview") is None:
            data.pop("preview", None)
        else:  # only what differs from a preview's defaults (the default options: {})
            assert self.preview is not None
            data["preview"] = self.preview.model_dump(mode="json", exclude_defaults=True)
        return data

    def body(self) -> str:
        """The message as SQS carries it: JSON in ASCII, every other character escaped, so
        no text of a user's (an option in the preview) holds a character SQS refuses
        (``InvalidMessageContents``: devstack.sqs_contents)."""
        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"))

    @property
    def preview_carried(self) -> Preview | None:
        """The preview the worker may take instead of reading the record: none in a deferred
        job's successor, which is always looked at (``rules.another_carries_it``: a copy of
        one must not start a second line of successors)."""
        return self.preview if self.deferrals == 0 else None

    @property
    def queue(self) -> str:
        """The queue this message goes to: the pool's queue of its priority."""
        return queue_key(self.pool, self.priority)

    @classmethod
    def for_job(cls, job: JobRecord, *, preview: bool = False) -> JobMessage:
        """``preview``: with the job's preview when it may carry one (a message to send)."""
        sent = carried(job.preview(), job.request) if preview else None
        return cls(
            tenant_id=job.tenant_id,
            job_id=job.job_id,
            attempt=job.attempt,
            correlation_id=job.correlation_id,
            pool=job.pool,
            priority=job.request.priority,
            preview=sent,
        )
