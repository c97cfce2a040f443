"""Steps that shape the run: paginate (a repeated block), evaluate (policy-gated),
await_human (the job waits for a person)."""

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
# A job waiting for a person holds an open browser context this long at most
# (docs/decisions.md: what it costs).
MAX_HUMAN_WAIT_S = 3600
DEFAULT_HUMAN_WAIT_S = 900
PROMPT_MAX_CHARS = 2000
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


class AwaitHuman(StepBase):
    """Park the job until a person continues it (``POST /v1/jobs/{id}/continue``, the
    console, ``pagefleet continue``), in the same browser, at the next step.

    The job is ``waiting_for_human`` meanwhile: its running slot is given back, its browser
    context kept. Unanswered after ``timeout_s`` it fails with ``error.kind``
    ``human_timeout``. In a browser session the session waits (keeping its slot), the
    person's note is the step's ``human_note``, and a timeout fails the step, not the session.
    """

    action: Literal["await_human"] = "await_human"
    prompt: str = Field(min_length=1, max_length=PROMPT_MAX_CHARS)
    timeout_s: int = Field(default=DEFAULT_HUMAN_WAIT_S, ge=1, le=MAX_HUMAN_WAIT_S)
