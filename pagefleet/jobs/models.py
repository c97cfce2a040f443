"""A job's request: what a client submits (its settings, steps and inputs), checked whole.

The record a job keeps as it runs, and its queue message, are in ``pagefleet.jobs.record``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from pagefleet.ids import is_ulid, new_ulid
from pagefleet.jobs.checkpoints import (
    irreversible_problem,
)
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.request_parts import (
    Notify,
    RetryPolicy,
)
from pagefleet.jobs.session_terms import MAX_COST_USD, SessionTerms
from pagefleet.jobs.spend import CostCap
from pagefleet.monitors.expect import Expect
from pagefleet.monitors.spec import Monitor
from pagefleet.specs.pools import POOL_NAME_PATTERN, Requirements
from pagefleet.specs.resources import DEFAULT_POOL, Priority
from pagefleet.specs.stored import stored
from pagefleet.specs.tenant_defaults import PoolNames
from pagefleet.specs.traces import TraceMode
from pagefleet.targets.egress_policy import target_problem
from pagefleet.workflow import (
    MAX_BLOCK_DEPTH,
    Goto,
    Paginate,
    Press,
    Screenshot,
    Step,
    Upload,
    iter_steps,
    too_deep_block,
)
from pagefleet.workflow.keys import key_problem
from pagefleet.workflow.steps.capture import png_name
from pagefleet.workflow.templating import JOB_FIELDS, literal_part, references, render

InputValue = str | int | float | bool
MAX_DEPENDENCIES = 50
MAX_DELAY_SECONDS = 7 * 24 * 3600
# A goto's URL with its inputs filled in: Chromium's own bound (url::kMaxURLChars, 2 MiB).
GOTO_URL_MAX_CHARS = 2 * 1024 * 1024


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_of_iso(stamp: str) -> float:
    """Epoch seconds of a time written by ``iso``."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def new_job_id() -> str:
    # ULIDs sort by creation time, so listing by sort key descending is newest first.
    return new_ulid()


def refuse_deep_blocks(steps: Any) -> Any:
    """Before the step models parse (and recurse into) a workflow: blocks nested too deep."""
    path = too_deep_block(steps)
    if path is not None:
        raise ValueError(
            f"{path} is a block nested more than {MAX_BLOCK_DEPTH} levels deep "
            f"(paginate inside paginate); at most {MAX_BLOCK_DEPTH} levels are allowed"
        )
    return steps


class JobSettings(BaseModel):
    """What a job is run with, whether its steps come inline or from a named workflow."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str | None = Field(
        default=None, max_length=200, description="a label for lists and the console"
    )
    inputs: dict[str, InputValue] = Field(
        default_factory=dict,
        max_length=200,
        description="values the steps read as {{inputs.NAME}}",
    )
    # Which of the deployment's pools is checked where the job is planned (its pools are
    # settings: CoreSettings.pools), so a pool declared in the deploy file needs no code.
    pool: str = Field(
        default=DEFAULT_POOL, pattern=POOL_NAME_PATTERN, description="the worker pool"
    )
    # What the job needs from its pool (memory, region, egress, isolation, no Spot): the API
    # routes it to the smallest pool that has it all, or refuses it naming every pool
    # (pagefleet.specs.pools). With ``pool`` also given, that pool must have it.
    requires: Requirements | None = Field(
        default=None,
        description="what it needs of a pool: the smallest that has it runs it",
    )
    max_attempts: int = Field(default=3, ge=1, le=10, description="attempts in all")
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=MAX_COST_USD,
        description="stop it (cost_cap_reached) when its browser time cost this much",
    )
    deadline: datetime | None = Field(default=None, description="start by then, or it ends expired")
    retry: RetryPolicy = Field(
        default_factory=lambda: RetryPolicy(), description="the backoff between attempts"
    )
    notify: Notify | None = Field(default=None, description="where its end is told")
    # Dispatch: which of the pool's queues, when, and after which jobs.
    priority: Priority = Field(default="normal", description="high goes first")
    delay_seconds: int | None = Field(
        default=None,
        ge=0,
        le=MAX_DELAY_SECONDS,
        description="start this many seconds from now",
    )
    run_at: datetime | None = Field(
        default=None, description="start at this time (7 days ahead at most)"
    )
    depends_on: list[str] = Field(
        default_factory=list,
        max_length=MAX_DEPENDENCIES,
        description="jobs that must succeed first ({{parents.ID.NAME}})",
    )
    # What undoes the job's irreversible effect when it fails after one took effect
    # (docs/irreversible-steps.md); a named workflow's, unless the job gives its own.
    compensate: list[Step] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description=(
            "steps run once if the job fails after an irreversible step took effect (cancel "
            "the order); if they fail, the job needs review"
        ),
    )

    @field_validator("compensate", mode="before")
    @classmethod
    def _compensation_not_too_deep(cls, steps: Any) -> Any:
        return refuse_deep_blocks(steps)

    # What a good result looks like, and what to compare with the baseline run.
    expect: Expect | None = Field(default=None, description="what a good result looks like")
    monitor: Monitor | None = Field(default=None, description="compare each run with a baseline")

    @field_validator("deadline", "run_at")
    @classmethod
    def _aware_time(cls, when: datetime | None, info: ValidationInfo) -> datetime | None:
        if when is not None and when.tzinfo is None:
            raise ValueError(f"{info.field_name} needs a timezone, e.g. 2026-12-01T10:00:00Z")
        return when

    @field_validator("depends_on")
    @classmethod
    def _job_ids(cls, parents: list[str]) -> list[str]:
        for parent in parents:
            if not is_ulid(parent):
                raise ValueError(f"{parent!r} is not a job id")
        if len(set(parents)) != len(parents):
            raise ValueError("depends_on names a job twice")
        return parents

    @field_validator("inputs")
    @classmethod
    def _input_names(cls, inputs: dict[str, InputValue]) -> dict[str, InputValue]:
        for key in inputs:
            if not key.isidentifier():
                raise ValueError(f"input name {key!r} must be an identifier")
        return inputs

    @model_validator(mode="after")
    def _one_start(self) -> JobSettings:
        if self.delay_seconds is not None and self.run_at is not None:
            raise ValueError("give delay_seconds or run_at, not both")
        return self

    def fingerprint(self) -> str:
        """Stable hash of the request, to tell an idempotent retry from a different body."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# A job keeps at most this many links to its offline replays (the newest are dropped).
MAX_REPLAYS_LISTED = 20


class ReplayOf(BaseModel):
    """What an offline replay runs against: the job it replays and that job's HAR."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    job_id: str
    har_key: str = Field(description="the S3 key of the replayed job's har.zip")


class JobRequest(JobSettings):
    """A job as it runs: its steps, inputs and options (inline, or resolved from a named
    workflow version when it was submitted)."""

    # A browser session (pagefleet.browsing): its steps come one at a time from its caller.
    # Set only by the sessions' service, never by a job's client (not in the job schema).
    session: SkipJsonSchema[SessionTerms | None] = Field(
        default=None, exclude_if=lambda v: v is None
    )
    # An offline replay (POST /v1/jobs/{id}/replay): its steps answered from this HAR only.
    # Set only by the replay service, never by a job's client (not in the job schema).
    replay: SkipJsonSchema[ReplayOf | None] = Field(default=None, exclude_if=lambda v: v is None)
    # ``max_cost_usd`` in browser-seconds, worked out where the job is made (jobs.spend).
    cost_cap: SkipJsonSchema[CostCap | None] = Field(default=None, exclude_if=lambda v: v is None)
    steps: list[Step] = Field(
        max_length=500,
        json_schema_extra={"minItems": 1},
        description="what the browser does, in order (docs/reference/steps.md)",
    )
    options: JobOptions = Field(
        default=JobOptions.model_construct(),  # as Viewport's, above
        description="how the browser is set up and how long things may take",
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _blocks_not_too_deep(cls, steps: Any) -> Any:
        return refuse_deep_blocks(steps)

    @field_validator("steps")
    @classmethod
    def _some_steps(cls, steps: list[Step], info: ValidationInfo) -> list[Step]:
        if not steps and info.data.get("session") is None:
            raise ValueError("List should have at least 1 item after validation, not 0")
        return steps

    @model_validator(mode="after")
    def _inputs_exist(self, info: ValidationInfo) -> JobRequest:
        problem = irreversible_problem(self.steps, self.compensate)
        if problem is not None:
            raise ValueError(problem)
        everywhere = [(f"steps[{p}]", s) for p, s in iter_steps(self.steps)]
        everywhere += [(f"compensate[{p}]", s) for p, s in iter_steps(self.compensate or [])]
        for where, step in everywhere:
            problem = _step_problem(where, step, self.inputs, self.depends_on)
            if problem is None and not stored(info):
                problem = _filled_in_problem(where, step, self.inputs)
            if problem is not None:
                raise ValueError(problem)
        for namespace, name in references(self.options.model_dump()):
            if namespace == "inputs" and name not in self.inputs:
                raise ValueError(f"options use {{{{inputs.{name}}}}} but inputs has no {name!r}")
            if namespace == "job":
                raise ValueError(f"options cannot use {{{{job.{name}}}}}; only steps can")
        tracked = self.tracked_screenshot
        if tracked is not None and not any(
            isinstance(step, Screenshot) and step.artifact_name == tracked
            for _, step in iter_steps(self.steps)
        ):
            raise ValueError(
                f"monitor.screenshot names {tracked!r}, which no screenshot step makes"
            )
        return self

    @property
    def tracked_screenshot(self) -> str | None:
        """The artifact name of the screenshot ``monitor`` compares, if any."""
        if self.monitor is None or self.monitor.screenshot is None:
            return None
        return png_name(self.monitor.screenshot)

    def uses_job_field(self, name: str) -> bool:
        """Whether a step (or a compensating one) uses ``{{job.<name>}}``."""
        dumped = [s.model_dump() for s in [*self.steps, *(self.compensate or [])]]
        return ("job", name) in set(references(dumped))

    def secret_names(self) -> set[str]:
        """Names of the secrets this job references (resolved only in the worker)."""
        steps = [*self.steps, *(self.compensate or [])]
        found = references([s.model_dump() for s in steps] + [self.options.model_dump()])
        return {name for namespace, name in found if namespace == "secrets"}


def _step_problem(
    where: str, step: Step, inputs: dict[str, Any], depends_on: list[str]
) -> str | None:
    """What a step references that the job does not have (an input, a job field, a parent's
    result, an upload's file), or None."""
    # A block's nested steps are checked on their own, under their own path.
    own = step.model_dump(exclude={"steps"} if isinstance(step, Paginate) else None)
    for namespace, name in references(own):
        if namespace == "inputs" and name not in inputs:
            return f"{where} uses {{{{inputs.{name}}}}} but inputs has no {name!r}"
        if namespace == "job" and name not in JOB_FIELDS:
            return f"{where} uses {{{{job.{name}}}}}; a job has " + " and ".join(
                f"{{{{job.{f}}}}}" for f in JOB_FIELDS
            )
        if namespace == "parents" and name not in depends_on:
            return f"{where} reads the result of job {name}, which depends_on does not name"
    missing = _missing_upload(step, inputs)
    if missing is not None:
        return f"{where} uploads input {missing!r} but inputs has none"
    return None


def _filled_in_problem(where: str, step: Step, inputs: dict[str, Any]) -> str | None:
    """Why a goto's URL is no page a job may open, or a press's key no key Playwright knows,
    once the job's inputs are filled in (None: neither, or it uses a secret, a parent's
    result or the job's own fields: the worker meets those)."""
    if isinstance(step, Goto):
        url = _with_inputs(step.url, inputs)
        problem = None if url is None else target_problem(url, max_chars=GOTO_URL_MAX_CHARS)
        return None if problem is None else f"{where} cannot go to its url: {problem}"
    # A literal key was checked by the step itself.
    if isinstance(step, Press) and literal_part(step.key) != step.key:
        key = _with_inputs(step.key, inputs)
        problem = None if key is None else key_problem(key)
        return None if problem is None else f"{where} cannot press its key: {problem}"
    return None


def _with_inputs(text: str, inputs: dict[str, Any]) -> str | None:
    """``text`` with the job's inputs filled in (None: it names more than inputs)."""
    try:
        return str(render(text, inputs, {}))
    except KeyError:
        return None


def _missing_upload(step: Step, inputs: dict[str, Any]) -> str | None:
    """The first input an upload step names that the job does not carry."""
    if not isinstance(step, Upload):
        return None
    return next(
        (f.input for f in step.uploads() if f.input is not None and f.input not in inputs), None
    )


class TenantPolicy(BaseModel):
    """A tenant's limits and rights as an admin set them (``pagefleet admin set-limits``).

    None means "the stage's default" (``pagefleet.tenancy.limits``), so a stage can change a
    default without rewriting every tenant; ``effective_limits`` resolves both.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    # evaluate runs tenant-supplied JavaScript in the page; off unless granted.
    allow_evaluate: bool | None = None
    submits_per_minute: int | None = Field(default=None, ge=1, le=100_000)
    burst: int | None = Field(default=None, ge=1, le=100_000)
    max_queued: int | None = Field(default=None, ge=1, le=1_000_000)
    # The running set is kept in one item: a few hundred ids at most.
    max_running: int | None = Field(default=None, ge=1, le=200)
    retention_days: int | None = Field(default=None, ge=1, le=3650)
    session_days: int | None = Field(default=None, ge=1, le=365)
    # The trace mode of this tenant's jobs that do not set ``options.trace``.
    trace: TraceMode | None = None
    # The worker pools this tenant's jobs may run in (a job routed or naming another is
    # refused with a 422 naming these).
    pools: PoolNames | None = Field(default=None, min_length=1, max_length=50)
