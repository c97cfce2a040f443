"""What a client submits, and how it becomes the job that runs.

A submission carries its steps inline, or names a workflow version (``"shop@2"``, or
``"shop"`` for the latest) whose steps, default inputs and options it takes; inputs and
options given with the job override the workflow's. The job record keeps the steps it
resolved to with the workflow's name and version, so it always runs what it named.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from pagefleet.errors import InvalidField, NotFound
from pagefleet.jobs.models import JobRequest, JobSettings, refuse_deep_blocks
from pagefleet.jobs.options import JobOptions
from pagefleet.workflow import Step
from pagefleet.workflow.versions import WorkflowStore, WorkflowVersion, resolve


class JobSubmission(JobSettings):
    """``POST /v1/jobs``: inline ``steps``, or a named ``workflow`` with its ``inputs``."""

    # workflow before steps: the steps' check reads it.
    workflow: str | None = Field(
        default=None,
        min_length=1,
        max_length=120,
        description="a named workflow: NAME@VERSION, or NAME (the latest)",
    )
    steps: list[Step] | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        validate_default=True,
        description="what the browser does, in order (or a workflow)",
    )
    options: JobOptions | None = Field(
        default=None,
        description="the browser's setup (over a workflow's, key by key)",
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _blocks_not_too_deep(cls, steps: Any) -> Any:
        return refuse_deep_blocks(steps)

    @field_validator("steps")
    @classmethod
    def _steps_or_workflow(cls, steps: list[Step] | None, info: ValidationInfo) -> Any:
        named = info.data.get("workflow") is not None
        if steps is None and not named:
            raise ValueError("Field required (or a workflow reference, name or name@version)")
        if steps is not None and named:
            raise ValueError("give steps or a workflow reference, not both")
        return steps


SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:pagefleet:v1:workflow.schema.json"
SCHEMA_TITLE = "pagefleet job request (the body of POST /v1/jobs)"


def submission_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``POST /v1/jobs``'s body: what an editor validates
    a workflow against as it is typed (``GET /v1/workflow.schema.json``, ``pagefleet schema``).
    The model's checks that need the tenant's data (a named workflow, its inputs, parents)
    are ``POST /v1/jobs/validate``'s."""
    return copy.deepcopy(_schema())


@functools.cache
def _schema() -> dict[str, Any]:
    # Built once a process: the models never change while it runs.
    schema = JobSubmission.model_json_schema()
    return {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, **schema, "title": SCHEMA_TITLE}


@dataclass(frozen=True)
class Resolved:
    request: JobRequest
    workflow: WorkflowVersion | None = None


def resolve_submission(
    submission: JobSubmission | JobRequest,
    tenant_id: str,
    workflows: WorkflowStore | None,
) -> Resolved:
    """The job a submission makes; ``InvalidField`` (422) naming what cannot be used."""
    if isinstance(submission, JobRequest):
        return Resolved(submission)
    own = submission.model_dump(
        mode="json", exclude={"workflow", "steps", "options"}, exclude_none=True
    )
    given_options = (
        submission.options.model_dump(mode="json", exclude_unset=True)
        if submission.options is not None
        else {}
    )
    if submission.workflow is None:
        assert submission.steps is not None
        data = {
            **own,
            "steps": [s.model_dump(mode="json", exclude_none=True) for s in submission.steps],
            "options": given_options,
        }
        return Resolved(_request(data, ""))
    if workflows is None:
        raise InvalidField("named workflows are not available here", field="workflow")
    try:
        version = resolve(workflows, tenant_id, submission.workflow)
    except NotFound as exc:
        raise InvalidField(exc.message, field="workflow") from None
    definition = version.definition
    compensate = own.pop("compensate", None)
    if compensate is None and definition.compensate is not None:
        compensate = [s.model_dump(mode="json", exclude_none=True) for s in definition.compensate]
    data = {
        **own,
        "name": submission.name or f"{version.name}@{version.version}",
        "steps": [s.model_dump(mode="json", exclude_none=True) for s in definition.steps],
        "compensate": compensate,
        "inputs": {**definition.inputs, **submission.inputs},
        "options": {**definition.options, **given_options},
    }
    if submission.expect is None and definition.expect is not None:
        data["expect"] = definition.expect.model_dump(mode="json")
    return Resolved(_request(data, f"{version.name}@{version.version}: "), version)


def _request(data: dict[str, Any], origin: str) -> JobRequest:
    try:
        return JobRequest.model_validate(data)
    except ValidationError as exc:
        raise InvalidField.from_errors(exc.errors(), origin=origin) from None
