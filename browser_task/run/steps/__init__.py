"""Step handlers, one module per step family, mapping each step model to Playwright calls.

``paginate`` and ``use_session`` also need where they sit in the workflow (a block runs
nested steps under its path; a leading use_session was already applied), so the executor
dispatches those two itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from browser_task.run.context import RunContext
from browser_task.run.steps import (
    capture,
    control,
    extraction,
    human,
    interaction,
    navigation,
    network,
    session,
)

Handler = Callable[[Any, RunContext], Awaitable[None]]

HANDLERS: dict[str, Handler] = {
    "goto": navigation.goto,
    "wait_for": navigation.wait_for,
    "sleep": navigation.sleep,
    "back": navigation.back,
    "forward": navigation.forward,
    "switch_tab": navigation.switch_tab,
    "click": interaction.click,
    "fill": interaction.fill,
    "type": interaction.type_text,
    "press": interaction.press,
    "select": interaction.select,
    "check": interaction.check,
    "uncheck": interaction.uncheck,
    "hover": interaction.hover,
    "scroll": interaction.scroll,
    "upload": interaction.upload,
    "drag": interaction.drag,
    "dialog": interaction.dialog,
    "route": network.route,
    "extract": extraction.extract,
    "assert": extraction.assert_page,
    "screenshot": capture.screenshot,
    "pdf": capture.pdf,
    "download": capture.download,
    "evaluate": control.evaluate,
    "await_human": human.await_human,
    "save_session": session.save_session,
}

__all__ = ["HANDLERS", "Handler"]
