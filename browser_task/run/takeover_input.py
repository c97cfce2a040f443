"""A person's input on a taken-over page (pagefleet.browsing.input_events) as the CDP calls
that play it on the job's page (``browser_task.run.takeover``): coordinates already scaled
from the frame to the viewport by the caller's factors.
"""

from __future__ import annotations

from typing import Any

from pagefleet.browsing.input_events import (
    MODIFIER_BITS,
    AnyInput,
    KeyInput,
    MoveInput,
    PressInput,
    ScrollInput,
    TextInput,
)

# Keys by KeyboardEvent.key: (windowsVirtualKeyCode, code, text typed), as Chromium wants.
NAMED_KEYS: dict[str, tuple[int, str, str | None]] = {
    "Enter": (13, "Enter", "\r"),
    "Tab": (9, "Tab", None),
    "Backspace": (8, "Backspace", None),
    "Escape": (27, "Escape", None),
    "Delete": (46, "Delete", None),
    "ArrowLeft": (37, "ArrowLeft", None),
    "ArrowUp": (38, "ArrowUp", None),
    "ArrowRight": (39, "ArrowRight", None),
    "ArrowDown": (40, "ArrowDown", None),
    "Home": (36, "Home", None),
    "End": (35, "End", None),
    "PageUp": (33, "PageUp", None),
    "PageDown": (34, "PageDown", None),
    " ": (32, "Space", " "),
}
BUTTON_BITS = {"left": 1, "right": 2, "middle": 4}


def cdp_events(event: AnyInput, sx: float, sy: float) -> list[dict[str, Any]]:
    """One input event as the CDP calls that play it (``method`` and its parameters).

    A press carries its ``clickCount``: Chromium makes a ``dblclick`` of a release whose
    count is 2, as a real mouse's second click is (Playwright's ``dblclick`` plays the same)."""
    modifiers = sum(MODIFIER_BITS[m] for m in event.modifiers)
    if isinstance(event, TextInput):
        return [{"method": "Input.insertText", "text": event.text}]
    if isinstance(event, KeyInput):
        return _key(event.key, modifiers)
    at = {"x": event.x * sx, "y": event.y * sy, "modifiers": modifiers}
    mouse = "Input.dispatchMouseEvent"
    if isinstance(event, ScrollInput):
        # Wheel deltas are CSS pixels already (the viewer's own scroll), not frame pixels.
        return [
            {"method": mouse, "type": "mouseWheel", **at, "deltaX": event.dx, "deltaY": event.dy}
        ]
    if isinstance(event, MoveInput):
        down = {"button": event.buttons[0] if event.buttons else "none"}
        bits = sum(BUTTON_BITS[b] for b in set(event.buttons))
        return [{"method": mouse, "type": "mouseMoved", **at, **down, "buttons": bits}]
    if isinstance(event, PressInput):
        pressed = event.type == "down"
        return [
            {
                "method": mouse,
                "type": "mousePressed" if pressed else "mouseReleased",
                **at,
                "button": event.button,
                "buttons": BUTTON_BITS[event.button] if pressed else 0,
                "clickCount": event.count,
            }
        ]
    out: list[dict[str, Any]] = [{"method": mouse, "type": "mouseMoved", **at}]
    held = {"button": event.button, "buttons": BUTTON_BITS[event.button]}
    for count in range(1, event.count + 1):
        out.append({"method": mouse, "type": "mousePressed", **at, **held, "clickCount": count})
        out.append(
            {
                "method": mouse,
                "type": "mouseReleased",
                **at,
                **held,
                "buttons": 0,
                "clickCount": count,
            }
        )
    return out


def _key(key: str, modifiers: int) -> list[dict[str, Any]]:
    code_of, code, text = NAMED_KEYS.get(key, (0, "", None))
    if len(key) == 1 and key not in NAMED_KEYS:
        text = key
        code_of = ord(key.upper()) if key.isalnum() and key.isascii() else 0
        code = f"Key{key.upper()}" if key.isalpha() and key.isascii() else ""
    if modifiers & (MODIFIER_BITS["Control"] | MODIFIER_BITS["Meta"] | MODIFIER_BITS["Alt"]):
        text = None  # a shortcut types nothing
    base = {
        "method": "Input.dispatchKeyEvent",
        "key": key,
        "code": code,
        "windowsVirtualKeyCode": code_of,
        "modifiers": modifiers,
    }
    down = {**base, "type": "keyDown", "text": text} if text else {**base, "type": "rawKeyDown"}
    return [down, {**base, "type": "keyUp"}]
