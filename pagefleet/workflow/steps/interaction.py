"""Steps that act on the page: click, fill."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pagefleet.workflow.steps.base import SELECTOR, StepBase


class Click(StepBase):
    action: Literal["click"] = "click"
    selector: str = SELECTOR
    button: Literal["left", "right", "middle"] = "left"
    click_count: int = Field(default=1, ge=1, le=3)


class Fill(StepBase):
    action: Literal["fill"] = "fill"
    selector: str = SELECTOR
    value: str = Field(max_length=100_000, description="May use {{inputs.x}} and {{secrets.NAME}}")
