"""Steps that shape the run: paginate (a repeated block), evaluate (policy-gated)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from pagefleet.workflow.steps.base import SELECTOR, Later, StepBase

if TYPE_CHECKING:
    from pagefleet.workflow import Step

    Steps = list[Step]
else:
    Steps = list[Annotated[Any, Later("Step")]]

MAX_PAGES = 1_000
# Paginate blocks inside paginate blocks: enough for pages of pages of pages, and a bound
# on how deep every recursive walk of a workflow (validation, the executor) may go.
MAX_BLOCK_DEPTH = 3


class Paginate(StepBase):
    """Run ``steps`` on this page, then click ``next`` and repeat while it exists.

    Stops when the ``next`` selector is absent (or disabled) or after ``max_pages`` pages.
    """

    action: Literal["paginate"] = "paginate"
    steps: Steps = Field(min_length=1, max_length=100)
    next: str = SELECTOR
    max_pages: int = Field(default=10, ge=1, le=MAX_PAGES)
    # How the page changes after the click: wait for this load state.
    wait_until: Literal["load", "domcontentloaded", "networkidle", "commit"] = "load"


class Evaluate(StepBase):
    """Run a JavaScript expression in the page; its JSON value goes into the result.

    Refused unless the tenant's policy allows evaluate.
    """

    action: Literal["evaluate"] = "evaluate"
    expression: str = Field(min_length=1, max_length=20_000)
    name: str | None = Field(
        default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$"
    )
