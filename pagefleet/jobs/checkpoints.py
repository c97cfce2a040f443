"""What a job records about its irreversible steps: checkpoints, compensation, resolution.

A checkpoint is written, fenced by the attempt, before an irreversible step starts
(``started``) and when it ends (``done``); a check run by a later attempt, or a person's
resolution, says ``done`` or ``not_done``; ``unknown`` is what nobody could tell. The job
keeps one checkpoint per irreversible step, the latest word on it
(docs/irreversible-steps.md). The lifecycle's decisions on them are in ``jobs/rules.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.workflow import Paginate, Step, iter_steps

CheckpointState = Literal["started", "done", "not_done", "unknown"]
# How the state was learnt: the step ran, its check said so, or a person resolved it.
CheckpointHow = Literal["ran", "checked", "resolved"]
# At most this many irreversible steps in one job: each keeps a checkpoint in the record.
MAX_IRREVERSIBLE_STEPS = 20
CHECKPOINT_LABEL_MAX = 300


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    step: int = Field(description="the irreversible step's index (0-based, top level)")
    label: str = Field(description="the step as the user reads it (its label, or a summary)")
    state: CheckpointState
    attempt: int = Field(description="the attempt that wrote it")
    at: str = Field(description="when (ISO 8601, UTC)")
    how: CheckpointHow = "ran"

    @property
    def effect_at_stake(self) -> bool:
        """Whether a new attempt must not simply run the workflow from the start."""
        return self.state != "not_done"


class Compensation(BaseModel):
    """The job's ``compensate`` steps: run once, after it failed with an irreversible step
    done. ``started`` with no end means its worker stopped while compensating."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    state: Literal["started", "done", "failed"]
    attempt: int
    at: str
    reason: str = Field(description="the failure that called for it")
    error: str | None = Field(default=None, description="why the compensation failed")


class Resolution(BaseModel):
    """A person's word on a job in review (``POST /v1/jobs/{id}/resolve``)."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        defer_build=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    outcome: Literal["done", "not_done"]
    continue_: bool = Field(default=False, alias="continue")
    step: int | None = Field(default=None, description="the irreversible step resolved")
    by: str = Field(description="who resolved it (tenant:key_id)")
    at: str
    skipped: list[int] = Field(
        default_factory=list, description="steps after it recorded as skipped (done, no continue)"
    )


def pending(checkpoints: list[Checkpoint]) -> Checkpoint | None:
    """The latest irreversible step whose effect is at stake (started, done or unknown):
    what a new attempt must settle before it may go on. None: run from the start."""
    at_stake = [c for c in checkpoints if c.effect_at_stake]
    return max(at_stake, key=lambda c: c.step) if at_stake else None


def put(checkpoints: list[Checkpoint], checkpoint: Checkpoint) -> list[Checkpoint]:
    """``checkpoints`` with ``checkpoint`` as the word on its step, in step order."""
    others = [c for c in checkpoints if c.step != checkpoint.step]
    return sorted([*others, checkpoint], key=lambda c: c.step)


def restate(
    checkpoints: list[Checkpoint], step: int, state: CheckpointState, **changes: object
) -> list[Checkpoint]:
    """``checkpoints`` with step ``step``'s entry in ``state`` (and ``changes``)."""
    return [
        c.model_copy(update={"state": state, **changes}) if c.step == step else c
        for c in checkpoints
    ]


def for_review(checkpoints: list[Checkpoint]) -> list[Checkpoint]:
    """The checkpoints of a job going to review: a step that started and was never
    settled reads ``unknown`` (what the person is asked to decide)."""
    return [
        c.model_copy(update={"state": "unknown"}) if c.state == "started" else c
        for c in checkpoints
    ]


def irreversible_problem(steps: list[Step], compensate: list[Step] | None) -> str | None:
    """What is wrong with where a workflow marks steps irreversible, else None.

    A checkpoint names a top-level step: an irreversible step inside a paginate block
    would run once a page. Compensating steps run once by construction.
    """
    marked = [index for index, step in enumerate(steps) if step.irreversible]
    for path, step in iter_steps(steps):
        if "." in path and step.irreversible:
            return f"steps[{path}] is irreversible inside a block; only top-level steps may be"
    for index in marked:
        if isinstance(steps[index], Paginate):
            return f"steps[{index}] is a paginate block: mark the step inside it that acts"
    if len(marked) > MAX_IRREVERSIBLE_STEPS:
        return (
            f"{len(marked)} steps are irreversible; a job may have at most "
            f"{MAX_IRREVERSIBLE_STEPS} (split it into jobs that depend on each other)"
        )
    for path, step in iter_steps(compensate or []):
        if step.irreversible:
            return f"compensate[{path}] is irreversible; compensating steps run once already"
    if compensate and not marked:
        return "compensate runs after an irreversible step took effect, and no step is irreversible"
    return None
