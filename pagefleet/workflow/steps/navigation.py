"""Steps that move the page or wait: goto, wait_for, sleep."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pagefleet.workflow.steps.base import FrameStep, StepBase

LoadState = Literal["load", "domcontentloaded", "networkidle", "commit"]

MAX_SLEEP_MS = 60_000


class Goto(StepBase):
    """Open a URL and wait for the load state (the target must pass the egress policy)."""

    action: Literal["goto"] = "goto"
    url: str = Field(min_length=1, max_length=8192, description="http(s) URL; may use {{inputs.x}}")
    wait_until: LoadState = "load"


class WaitFor(FrameStep):
    """Wait for a selector to reach a state, the URL to match, or a load state."""

    action: Literal["wait_for"] = "wait_for"
    selector: str | None = Field(default=None, min_length=1, max_length=2000)
    state: Literal["attached", "detached", "visible", "hidden"] = "visible"
    url: str | None = Field(default=None, min_length=1, max_length=8192, description="glob or URL")
    load_state: LoadState | None = None

    @model_validator(mode="after")
    def _exactly_one_target(self) -> WaitFor:
        targets = [t for t in (self.selector, self.url, self.load_state) if t is not None]
        if len(targets) != 1:
            raise ValueError("wait_for needs exactly one of selector, url or load_state")
        return self


class Sleep(StepBase):
    """A bounded pause; prefer wait_for, which ends as soon as the page is ready."""

    action: Literal["sleep"] = "sleep"
    ms: int = Field(ge=0, le=MAX_SLEEP_MS)
