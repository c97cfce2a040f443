"""The workflow language: typed steps, a discriminated union on ``action``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, TypeAdapter

from pagefleet.workflow.steps.capture import Download, Pdf, Screenshot
from pagefleet.workflow.steps.checks import (
    CheckAssert,
    CheckExtract,
    CheckGoto,
    CheckHover,
    CheckScreenshot,
    CheckScroll,
    CheckSleep,
    CheckWaitFor,
)
from pagefleet.workflow.steps.control import MAX_BLOCK_DEPTH, AwaitHuman, Evaluate, Paginate
from pagefleet.workflow.steps.extraction import Assert, Extract, FieldSpec
from pagefleet.workflow.steps.interaction import (
    Check,
    Click,
    Dialog,
    Drag,
    Fill,
    Hover,
    Press,
    Scroll,
    Select,
    Type,
    Uncheck,
    Upload,
    UploadFile,
)
from pagefleet.workflow.steps.navigation import Back, Forward, Goto, Sleep, SwitchTab, WaitFor
from pagefleet.workflow.steps.network import Fulfill, Route
from pagefleet.workflow.steps.session import SaveSession, UseSession

Step = Annotated[
    Goto
    | WaitFor
    | Sleep
    | Back
    | Forward
    | SwitchTab
    | Click
    | Fill
    | Type
    | Press
    | Select
    | Check
    | Uncheck
    | Hover
    | Scroll
    | Upload
    | Drag
    | Dialog
    | Route
    | Extract
    | Assert
    | Screenshot
    | Pdf
    | Download
    | Paginate
    | Evaluate
    | AwaitHuman
    | SaveSession
    | UseSession,
    Field(discriminator="action"),
]

# The read-only steps an irreversible step's ``check`` may use: they look, never act.
CheckStep = Annotated[
    CheckGoto
    | CheckWaitFor
    | CheckSleep
    | CheckScroll
    | CheckHover
    | CheckExtract
    | CheckAssert
    | CheckScreenshot,
    Field(discriminator="action"),
]

STEP_ADAPTER: TypeAdapter[Step] = TypeAdapter(Step, config=ConfigDict(defer_build=True))


def too_deep_block(steps: Any) -> str | None:
    """The path of the first block nested deeper than ``MAX_BLOCK_DEPTH``, else None.

    Works on raw input (lists of dicts) or on steps, without recursion, so that it can run
    before the models parse (and recurse into) a hostile workflow.
    """
    pending: list[tuple[Any, str, int]] = [(steps, "steps", 0)]
    while pending:
        block, path, depth = pending.pop()
        if not isinstance(block, list):
            continue
        for index, step in enumerate(block):
            inner = step.get("steps") if isinstance(step, dict) else getattr(step, "steps", None)
            if not isinstance(inner, list):
                continue
            if depth + 1 > MAX_BLOCK_DEPTH:
                return f"{path}[{index}]"
            pending.append((inner, f"{path}[{index}].steps", depth + 1))
    return None


def iter_steps(steps: list[Step]) -> list[tuple[str, Step]]:
    """Every step with its path (``3`` or ``3.steps[1]``), nested blocks included."""
    out: list[tuple[str, Step]] = []
    for index, step in enumerate(steps):
        out.append((str(index), step))
        if isinstance(step, Paginate):
            out += [(f"{index}.steps[{sub}]", inner) for sub, inner in iter_steps(step.steps)]
    return out


__all__ = [
    "MAX_BLOCK_DEPTH",
    "STEP_ADAPTER",
    "Assert",
    "AwaitHuman",
    "Back",
    "Check",
    "CheckStep",
    "Click",
    "Dialog",
    "Download",
    "Drag",
    "Evaluate",
    "Extract",
    "FieldSpec",
    "Fill",
    "Forward",
    "Fulfill",
    "Goto",
    "Hover",
    "Paginate",
    "Pdf",
    "Press",
    "Route",
    "SaveSession",
    "Screenshot",
    "Scroll",
    "Select",
    "Sleep",
    "Step",
    "SwitchTab",
    "Type",
    "Uncheck",
    "Upload",
    "UploadFile",
    "UseSession",
    "WaitFor",
    "iter_steps",
    "too_deep_block",
]
