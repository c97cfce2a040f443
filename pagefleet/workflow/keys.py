"""The keys a ``press`` step may name: Playwright's, checked when the job is made.

Playwright presses a key by its name on a US keyboard: a ``KeyboardEvent.code`` value
(``KeyA``, ``Digit1``, ``Numpad0``), a named ``KeyboardEvent.key`` value (``Enter``,
``ArrowDown``, ``F1``), or one character such a keyboard types; ``+`` joins a chord
(``Control+Shift+A``; ``Shift++``). Any other name fails the step with "Unknown key", after
the steps before it ran, on every attempt (names are case-sensitive: ``enter`` and ``Esc``
fail). The set below is what Playwright's driver knows;
``tests/worker/test_input_rules_chromium.py`` holds it to the driver's own answers.
https://playwright.dev/python/docs/api/class-keyboard#keyboard-press
"""

from __future__ import annotations

import string

_NAMED = [
    "Alt",
    "AltGraph",
    "AltLeft",
    "AltRight",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "ArrowUp",
    "AudioVolumeDown",
    "AudioVolumeMute",
    "AudioVolumeUp",
    "Backquote",
    "Backslash",
    "Backspace",
    "BracketLeft",
    "BracketRight",
    "CapsLock",
    "Comma",
    "ContextMenu",
    "Control",
    "ControlLeft",
    "ControlOrMeta",
    "ControlRight",
    "Delete",
    "End",
    "Enter",
    "Equal",
    "Escape",
    "Home",
    "Insert",
    "MediaPlayPause",
    "MediaTrackNext",
    "MediaTrackPrevious",
    "Meta",
    "MetaLeft",
    "MetaRight",
    "Minus",
    "NumLock",
    "NumpadAdd",
    "NumpadDecimal",
    "NumpadDivide",
    "NumpadEnter",
    "NumpadMultiply",
    "NumpadSubtract",
    "PageDown",
    "PageUp",
    "Pause",
    "Period",
    "PrintScreen",
    "Quote",
    "ScrollLock",
    "Semicolon",
    "Shift",
    "ShiftLeft",
    "ShiftRight",
    "Slash",
    "Space",
    "Tab",
]
_FAMILIES = (
    [f"Digit{d}" for d in range(10)]
    + [f"Numpad{d}" for d in range(10)]
    + [f"Key{letter}" for letter in string.ascii_uppercase]
    + [f"F{n}" for n in range(1, 13)]
)
# What one US keyboard key types (space to tilde), and Enter's "\n" and "\r".
_CHARACTERS = [chr(code) for code in range(0x20, 0x7F)] + ["\n", "\r"]
KEY_NAMES = frozenset([*_NAMED, *_FAMILIES, *_CHARACTERS])


def chord(key: str) -> list[str]:
    """The keys of ``key`` as Playwright splits it: at each ``+`` that follows a key, so a
    ``+`` of its own is a key (``+``, ``Shift++``) and a trailing one leaves an empty key."""
    keys: list[str] = []
    building = ""
    for char in key:
        if char == "+" and building:
            keys.append(building)
            building = ""
        else:
            building += char
    keys.append(building)
    return keys


def key_problem(key: str) -> str | None:
    """Why Playwright would not press ``key`` (None: it would)."""
    for name in chord(key):
        if name in KEY_NAMES:
            continue
        if not name:
            return f"{key!r} ends in a + with no key after it"
        import difflib  # only for a refusal: the worker starts without it

        near = difflib.get_close_matches(name, sorted(k for k in KEY_NAMES if len(k) > 1), 1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        return (
            f"Playwright knows no key {name!r}{hint} (keys are named as on a US keyboard, "
            "case-sensitive: Enter, Tab, Escape, ArrowDown, KeyA, F1 to F12, or one character "
            "such a keyboard types; use a type step for other text)"
        )
    return None
