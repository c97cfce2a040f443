"""Named, versioned workflows: a version, a diff of two, the list."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pagefleet.view import View


class WorkflowVersionView(View):
    """One immutable version of a named workflow."""

    name: str
    version: int
    created_at: str
    definition: dict[str, Any] = Field(description="steps, default inputs and options")
    versions: list[int] | None = Field(
        default=None, description="every version of the name (on the latest-version route)"
    )


class WorkflowDiff(View):
    """Two versions of a workflow compared: a unified diff of their definitions, each as
    sorted, indented JSON (empty when they are the same)."""

    name: str
    from_version: int
    to_version: int
    diff: str
    changed: bool


class WorkflowStored(View):
    """201 to ``PUT /v1/workflows/{name}``: the version the definition was stored as."""

    name: str
    version: int
    created_at: str


class WorkflowSummary(View):
    name: str
    latest_version: int


class WorkflowList(View):
    workflows: list[WorkflowSummary]
