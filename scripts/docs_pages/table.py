"""Markdown tables for the reference pages."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a rate the code keeps as a float prints as the number it is
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ").strip()


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(value: object) -> str:
    return f"`{value}`"
