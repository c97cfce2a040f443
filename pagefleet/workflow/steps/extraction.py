"""Steps that read the page into the job's JSON result."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pagefleet.workflow.steps.base import SELECTOR, StepBase


class Extract(StepBase):
    """Read text or an attribute of the first match (or of every match with ``many``)."""

    action: Literal["extract"] = "extract"
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    selector: str = SELECTOR
    kind: Literal["text", "attribute", "html", "inner_text"] = "text"
    attribute: str | None = Field(default=None, min_length=1, max_length=200)
    many: bool = False

    @model_validator(mode="after")
    def _attribute_named(self) -> Extract:
        if (self.kind == "attribute") != (self.attribute is not None):
            raise ValueError("attribute is required with kind 'attribute' and only then")
        return self
