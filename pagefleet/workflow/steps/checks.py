"""The steps an irreversible step's ``check`` may use: read-only ones, that look and never
act. Each is its step, without ``irreversible`` and without a check of its own, which also
keeps the language's schema finite (a check inside a check inside a check...)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pagefleet.workflow.steps.base import StepBase
from pagefleet.workflow.steps.capture import Screenshot
from pagefleet.workflow.steps.extraction import Assert, Extract
from pagefleet.workflow.steps.interaction import Hover, Scroll
from pagefleet.workflow.steps.navigation import Goto, Sleep, WaitFor


class ReadOnly(StepBase):
    irreversible: Literal[False] = Field(default=False, description="a check only looks")
    check: None = Field(default=None, description="a check step has no check of its own")


class CheckGoto(ReadOnly, Goto):
    """goto, in a check."""


class CheckWaitFor(ReadOnly, WaitFor):
    """wait_for, in a check."""


class CheckSleep(ReadOnly, Sleep):
    """sleep, in a check."""


class CheckScroll(ReadOnly, Scroll):
    """scroll, in a check."""


class CheckHover(ReadOnly, Hover):
    """hover, in a check."""


class CheckExtract(ReadOnly, Extract):
    """extract, in a check (its value goes into the job's result)."""


class CheckAssert(ReadOnly, Assert):
    """assert, in a check: the last one failing says the effect did not happen."""


class CheckScreenshot(ReadOnly, Screenshot):
    """screenshot, in a check."""
