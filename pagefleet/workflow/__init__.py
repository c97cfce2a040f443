"""The workflow language: typed steps, a discriminated union on ``action``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from pagefleet.workflow.steps.capture import Screenshot
from pagefleet.workflow.steps.extraction import Extract
from pagefleet.workflow.steps.interaction import Click, Fill
from pagefleet.workflow.steps.navigation import Goto, WaitFor

Step = Annotated[
    Goto | WaitFor | Click | Fill | Extract | Screenshot, Field(discriminator="action")
]

STEP_ADAPTER: TypeAdapter[Step] = TypeAdapter(Step)

__all__ = ["STEP_ADAPTER", "Click", "Extract", "Fill", "Goto", "Screenshot", "Step", "WaitFor"]
