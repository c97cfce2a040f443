"""Steps that read the page into the job's JSON result: extract, assert."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.workflow.steps.base import SELECTOR, FrameStep

# value: an input's current value (what a user typed or picked, which no attribute holds);
# count: how many elements match (a number, never waits).
ExtractKind = Literal["text", "attribute", "html", "inner_text", "value", "count"]
RESULT_NAME = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class FieldSpec(BaseModel):
    """One field of a record, read relative to its row."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    selector: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="relative to the row; omit for the row itself",
    )
    kind: ExtractKind = "text"
    attribute: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _attribute_named(self) -> FieldSpec:
        if (self.kind == "attribute") != (self.attribute is not None):
            raise ValueError("attribute is required with kind 'attribute' and only then")
        if self.kind == "count":
            raise ValueError("a field reads one value per row; count is for a whole extract")
        return self


class Extract(FrameStep):
    """Read the first match, every match (``many``), or records (``fields`` per row).

    With ``fields`` the selector picks the rows and each field is read inside its row;
    the result is a list of objects. Results of the same name on later pages (paginate)
    are appended.
    """

    action: Literal["extract"] = "extract"
    name: str = RESULT_NAME
    selector: str = SELECTOR
    kind: ExtractKind = "text"
    attribute: str | None = Field(default=None, min_length=1, max_length=200)
    many: bool = False
    fields: dict[str, FieldSpec] | None = Field(default=None, min_length=1, max_length=100)

    @model_validator(mode="after")
    def _attribute_named(self) -> Extract:
        if (self.kind == "attribute") != (self.attribute is not None):
            raise ValueError("attribute is required with kind 'attribute' and only then")
        if self.kind == "count" and (self.many or self.fields is not None):
            raise ValueError("kind 'count' gives one number: drop many and fields")
        return self


class Assert(FrameStep):
    """Fail the job (permanently) unless the page shows what it should."""

    action: Literal["assert"] = "assert"
    text_contains: str | None = Field(default=None, min_length=1, max_length=10_000)
    selector: str | None = Field(default=None, min_length=1, max_length=2000)
    visible: bool | None = None
    url_matches: str | None = Field(
        default=None, min_length=1, max_length=2000, description="a regular expression"
    )

    @model_validator(mode="after")
    def _one_check(self) -> Assert:
        checks = [
            self.text_contains is not None,
            self.visible is not None,
            self.url_matches is not None,
        ]
        if sum(checks) != 1:
            raise ValueError("assert needs exactly one of text_contains, visible or url_matches")
        if self.visible is not None and self.selector is None:
            raise ValueError("assert visible needs a selector")
        if self.url_matches is not None:
            try:
                re.compile(self.url_matches)
            except re.error as exc:
                raise ValueError(f"url_matches is not a valid regular expression: {exc}") from exc
        return self
