"""Steps that move the page or wait: goto, wait_for, sleep, back, forward, switch_tab."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pagefleet.workflow.globs import UrlGlob
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
    url: UrlGlob | None = Field(
        default=None, min_length=1, max_length=8192, description="glob or URL"
    )
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


class Back(StepBase):
    """Go back one page in the tab's history (the browser's Back button) and wait for the
    load state; fails when there is no page to go back to."""

    action: Literal["back"] = "back"
    wait_until: LoadState = "load"


class Forward(StepBase):
    """Go forward one page in the tab's history (after a back); fails when there is none."""

    action: Literal["forward"] = "forward"
    wait_until: LoadState = "load"


# A tab a switch_tab step names by index: 0 the first, -1 the newest.
MAX_TABS = 100


class SwitchTab(StepBase):
    """Make another tab of the browser (a popup, a link's new tab) the one later steps act
    on: by ``index`` (the observation's ``tabs``; -1 the newest) or by ``url_contains``;
    waits, up to the step's timeout, for such a tab to open."""

    action: Literal["switch_tab"] = "switch_tab"
    index: int | None = Field(default=None, ge=-1, le=MAX_TABS, description="-1: the newest")
    url_contains: str | None = Field(default=None, min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _one_way(self) -> SwitchTab:
        if (self.index is None) == (self.url_contains is None):
            raise ValueError("switch_tab needs exactly one of index or url_contains")
        return self
