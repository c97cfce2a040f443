"""What every step shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import CoreSchema


class Later:
    """A step union named now and found when the model holding it is first built.

    The step unions (``pagefleet.workflow.Step``, ``CheckStep``) are made of the step models,
    so they exist only once every step module is loaded; a model that holds steps (a
    paginate's block, a step's check) names its union with this, and pydantic asks for it
    when it builds the model (on first use, not at import), from the package that made it.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        import pagefleet.workflow as workflow  # loaded by then: it is what builds the models

        return handler.generate_schema(getattr(workflow, self.name))


if TYPE_CHECKING:
    from pagefleet.workflow import CheckStep

    CheckSteps = list[CheckStep]
else:
    CheckSteps = list[Annotated[Any, Later("CheckStep")]]

FrameSelector = Annotated[str, Field(min_length=1, max_length=2000)]
# A check is a few read-only steps: open the page that would show the effect, look for it.
MAX_CHECK_STEPS = 20


class StepBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    label: str | None = Field(
        default=None,
        max_length=200,
        description="a name for the step that failures and run events show",
    )
    timeout_ms: int | None = Field(
        default=None,
        ge=1,
        le=600_000,
        description="this step's own timeout; default: the job's options' timeout",
    )
    # docs/irreversible-steps.md: a step whose effect must happen at most once.
    irreversible: bool = Field(
        default=False,
        description=(
            "the step has an effect that must not happen twice (pays, submits, sends, "
            "deletes): it is checkpointed, and never run again blindly after it started"
        ),
    )
    check: CheckSteps | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CHECK_STEPS,
        description=(
            "read-only steps that tell whether this irreversible step's effect already "
            "happened: passes when they all succeed, says 'not done' when the last assert "
            "fails; run first, in a fresh context, by an attempt after one that stopped "
            "after the step started"
        ),
    )

    @model_validator(mode="after")
    def _check_of_an_irreversible_step(self) -> StepBase:
        if self.check is not None and not self.irreversible:
            raise ValueError("check is for irreversible steps: set irreversible: true")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_irreversible(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A step that is not irreversible stores and hashes as before the fields existed
        # (job records, idempotency fingerprints, step labels).
        data = handler(self)
        if isinstance(data, dict):
            if not data.get("irreversible"):
                data.pop("irreversible", None)
            if data.get("check") is None:
                data.pop("check", None)
        return data

    def describe(self) -> str:
        """A one-line summary for errors and events (secrets are masked by the caller)."""
        fields = self.model_dump(
            exclude_none=True, exclude={"action", "label", "irreversible", "check"}
        )
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
