"""Named workflows: immutable, numbered versions per tenant (``name@3``).

``PUT /v1/workflows/{name}`` stores a new version (1, 2, ...); a job may then carry
``"workflow": "name@2"`` (or ``"name"`` for the latest) with its ``inputs`` instead of inline
steps. The job record keeps the steps it resolved to, with the name and version, so a job
always runs the version it named even after newer ones exist.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pagefleet import ids
from pagefleet.errors import InvalidRequest, NotFound
from pagefleet.monitors.expect import Expect
from pagefleet.workflow import Step

NAME_PATTERN = ids.WORKFLOW_NAME
_REFERENCE = re.compile(f"^(?P<name>{ids.NAME_CHARS})" + r"(?:@(?P<version>\d{1,9}))?$")
InputValue = str | int | float | bool


class WorkflowDefinition(BaseModel):
    """What a version holds: the steps, default inputs and default options of a job."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    description: str | None = Field(default=None, max_length=2000)
    steps: list[Step] = Field(min_length=1, max_length=500)
    # Run once if a job of it fails after an irreversible step took effect (a job may give
    # its own instead; checked with the steps when a job is made from it).
    compensate: list[Step] | None = Field(default=None, min_length=1, max_length=100)
    inputs: dict[str, InputValue] = Field(default_factory=dict, max_length=200)
    # Validated as JobOptions when a job is made from it (kept raw to stay mergeable).
    options: dict[str, Any] = Field(default_factory=dict)
    # What a good result of this workflow looks like (a job's own expect replaces it).
    expect: Expect | None = None

    @field_validator("inputs")
    @classmethod
    def _input_names(cls, inputs: dict[str, InputValue]) -> dict[str, InputValue]:
        for key in inputs:
            if not key.isidentifier():
                raise ValueError(f"input name {key!r} must be an identifier")
        return inputs


class WorkflowVersion(BaseModel):
    model_config = ConfigDict(defer_build=True)
    name: str
    version: int
    definition: WorkflowDefinition
    created_at: str


class WorkflowStore(Protocol):
    def put_version(self, tenant_id: str, record: WorkflowVersion) -> None:
        """Store ``record`` only if ``record.version`` is the next number (else raise
        ``VersionTaken``)."""

    def latest(self, tenant_id: str, name: str) -> WorkflowVersion | None: ...

    def get(self, tenant_id: str, name: str, version: int) -> WorkflowVersion | None: ...

    def versions(self, tenant_id: str, name: str) -> list[int]: ...

    def names(self, tenant_id: str) -> list[tuple[str, int]]:
        """Every workflow of the tenant with its latest version, by name."""


class VersionTaken(Exception):
    """Another request stored this version number first: take the next one."""


@dataclass(frozen=True)
class Reference:
    name: str
    version: int | None  # None: the latest


def parse_reference(text: str) -> Reference:
    match = _REFERENCE.match(text)
    if match is None:
        raise InvalidRequest(
            "workflow is NAME or NAME@VERSION (letters, digits, '_', '.', '-')", field="workflow"
        )
    version = match.group("version")
    if version is not None and int(version) < 1:
        raise InvalidRequest("workflow versions start at 1", field="workflow")
    return Reference(match.group("name"), int(version) if version else None)


def check_name(name: str) -> str:
    if not re.match(NAME_PATTERN, name):
        raise InvalidRequest(
            "a workflow name is 1 to 100 letters, digits, '_', '.', '-' (starting with a "
            "letter or digit)",
            field="name",
        )
    return name


def put_version(
    store: WorkflowStore, tenant_id: str, name: str, definition: WorkflowDefinition, at: str
) -> WorkflowVersion:
    """Store ``definition`` as the next version of ``name`` (1 for a new name)."""
    check_name(name)
    for _ in range(5):  # concurrent pushes of one name: each gets its own number
        latest = store.latest(tenant_id, name)
        record = WorkflowVersion(
            name=name,
            version=(latest.version + 1) if latest else 1,
            definition=definition,
            created_at=at,
        )
        try:
            store.put_version(tenant_id, record)
        except VersionTaken:
            continue
        return record
    raise InvalidRequest("this workflow is being changed concurrently; retry", field="name")


def resolve(store: WorkflowStore, tenant_id: str, reference: str) -> WorkflowVersion:
    """The version a job names; NotFound (404) for a name or version the tenant lacks."""
    ref = parse_reference(reference)
    found = (
        store.latest(tenant_id, ref.name)
        if ref.version is None
        else store.get(tenant_id, ref.name, ref.version)
    )
    if found is None:
        what = ref.name if ref.version is None else f"{ref.name}@{ref.version}"
        raise NotFound(f"workflow {what} not found", field="workflow")
    return found


@dataclass(frozen=True)
class VersionDiff:
    name: str
    from_version: int
    to_version: int
    diff: str  # unified diff text; "" when the definitions are the same

    @property
    def changed(self) -> bool:
        return bool(self.diff)


def diff_versions(
    store: WorkflowStore, tenant_id: str, name: str, from_version: int, to_version: int
) -> VersionDiff:
    """A unified diff of two versions' definitions, each as sorted, indented JSON (as the
    version routes show them); NotFound on ``name``, ``from`` or ``to`` for what is missing."""
    if store.latest(tenant_id, name) is None:
        raise NotFound(f"workflow {name} not found", field="name")
    texts = []
    for field, version in (("from", from_version), ("to", to_version)):
        found = store.get(tenant_id, name, version)
        if found is None:
            raise NotFound(f"workflow {name}@{version} not found", field=field)
        shown = found.definition.model_dump(mode="json", exclude_none=True)
        texts.append(json.dumps(shown, sort_keys=True, indent=2, ensure_ascii=False))
    import difflib  # on first call: 11 ms of a cold start compiled from source

    lines = difflib.unified_diff(
        texts[0].splitlines(),
        texts[1].splitlines(),
        fromfile=f"{name}@{from_version}",
        tofile=f"{name}@{to_version}",
        lineterm="",
    )
    text = "\n".join(lines)
    return VersionDiff(name, from_version, to_version, text + "\n" if text else "")
