"""Steps that produce artifacts: screenshot."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pagefleet.workflow.steps.base import ARTIFACT_NAME, StepBase


class Screenshot(StepBase):
    action: Literal["screenshot"] = "screenshot"
    name: str = ARTIFACT_NAME
    full_page: bool = False
    selector: str | None = Field(default=None, min_length=1, max_length=2000)
