"""A page's ARIA snapshot as a session observes it: password fields' values hidden.

Playwright's ``aria_snapshot`` writes a text box's value after its name
(``textbox "Password": hunter2``), password fields included, where Chromium's own
accessibility tree shows bullets. A password the page pre-filled (or a step typed without
``{{secrets.NAME}}``) is no secret the masker knows of, so it would be in every
observation: each password field's value is read from the page (every frame, open shadow
roots included: Playwright's CSS engine pierces them) and a text box showing it is shown
with ``***`` instead. Only text boxes' values are touched: a short password is a common
word elsewhere on a page.
"""

from __future__ import annotations

import contextlib
import json
import re

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from pagefleet.workflow.masking import MASK

PASSWORD_FIELDS = "input[type=password i]"  # noqa: S105  # a selector, not a password
# A text box line of a snapshot: ``- textbox "Name" [attrs]: value`` (the value last).
_TEXTBOX = re.compile(r'^(\s*- textbox(?: "(?:[^"\\]|\\.)*")?(?: \[[^\]]*\])*): (.*)$')


async def password_values(page: Page) -> set[str]:
    """The values of the page's password fields, in every frame."""
    values: set[str] = set()
    for frame in page.frames:
        with contextlib.suppress(PlaywrightError):  # a frame gone since listed
            found = await frame.locator(PASSWORD_FIELDS).evaluate_all(
                "fields => fields.map(field => field.value)"
            )
            values |= {v for v in found if isinstance(v, str) and v}
    return values


def hide_passwords(tree: str, passwords: set[str]) -> str:
    """``tree`` with each text box showing one of ``passwords`` shown as ``***``."""
    if not passwords:
        return tree
    lines = tree.split("\n")
    for n, line in enumerate(lines):
        match = _TEXTBOX.match(line)
        if match is not None and _shown(match.group(2)) in passwords:
            lines[n] = f"{match.group(1)}: {MASK}"
    return "\n".join(lines)


def _shown(value: str) -> str:
    """A snapshot's value as the field holds it (YAML double-quotes some, JSON-escaped)."""
    if value.startswith('"') and value.endswith('"') and len(value) > 1:
        with contextlib.suppress(ValueError):
            loaded = json.loads(value)
            if isinstance(loaded, str):
                return loaded
    return value


async def aria_snapshot(page: Page, *, timeout_ms: int, scope: str | None = None) -> str:
    """The body's (or ``scope``'s first match's) ARIA snapshot in Playwright's "ai" mode,
    which enters iframes and gives each element a ref (``aria-ref=REF`` reaches it), with
    password fields' values hidden."""
    root = page.locator(scope).first if scope else page.locator("body")
    tree = await root.aria_snapshot(mode="ai", timeout=timeout_ms)
    return hide_passwords(tree, await password_values(page))
