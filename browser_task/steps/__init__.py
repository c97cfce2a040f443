"""Step handlers, one module per step family, mapping each step model to Playwright calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from browser_task.context import RunContext
from browser_task.steps import capture, extraction, interaction, navigation

Handler = Callable[[Any, RunContext], Awaitable[None]]

HANDLERS: dict[str, Handler] = {
    "goto": navigation.goto,
    "wait_for": navigation.wait_for,
    "click": interaction.click,
    "fill": interaction.fill,
    "extract": extraction.extract,
    "screenshot": capture.screenshot,
}

__all__ = ["HANDLERS", "Handler"]
