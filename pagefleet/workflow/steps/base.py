"""What every step shares."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

FrameSelector = Annotated[str, Field(min_length=1, max_length=2000)]


class StepBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # Optional label a user gives a step; failures and events name it.
    label: str | None = Field(default=None, max_length=200)
    # Per-step override of the job's action timeout.
    timeout_ms: int | None = Field(default=None, ge=1, le=600_000)

    def describe(self) -> str:
        """A one-line summary for errors and events (secrets are masked by the caller)."""
        fields = self.model_dump(exclude_none=True, exclude={"action", "label"})
        args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{getattr(self, 'action', '?')}({args})"


class FrameStep(StepBase):
    """A step that finds its element by selector, optionally inside an iframe.

    Playwright selectors do not pierce iframes; ``frame`` names the iframe (by selector)
    whose document the step's selector is resolved in, or a list of selectors for nested
    iframes, outermost first (each resolved inside the previous one's document).
    """

    frame: FrameSelector | list[FrameSelector] | None = Field(
        default=None,
        description=(
            "selector of the iframe holding the element, or a list for nested iframes "
            "(outermost first); omit for the page itself"
        ),
    )

    @field_validator("frame")
    @classmethod
    def _frame_path(cls, frame: str | list[str] | None) -> str | list[str] | None:
        if isinstance(frame, list) and not 1 <= len(frame) <= 10:
            raise ValueError("frame lists 1 to 10 nested iframe selectors")
        return frame


Selector = str
SELECTOR = Field(
    min_length=1, max_length=2000, description="A Playwright selector (CSS, text=, xpath=...)"
)
ARTIFACT_NAME = Field(
    min_length=1,
    max_length=100,
    pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
    description="Artifact file name: letters, digits, dot, dash, underscore",
)
