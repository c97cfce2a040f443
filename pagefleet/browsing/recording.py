"""A session's steps made reusable: the literal values a caller names become inputs."""

from __future__ import annotations

from typing import Any

from pagefleet.errors import InvalidField
from pagefleet.workflow.versions import InputValue

# Keys that say what a step is, not what it does it with: never templated.
_FIXED_KEYS = frozenset({"action", "label"})


def parametrize(steps: list[dict[str, Any]], inputs: dict[str, InputValue]) -> list[dict[str, Any]]:
    """``steps`` with each named literal replaced by ``{{inputs.<name>}}``: a string
    anywhere inside a string value, any other value where a value equals it. A name whose
    literal occurs nowhere is a 422 naming ``inputs.<name>``. Longer literals go first, so
    a literal inside another is not split."""
    found: set[str] = set()
    ordered = sorted(inputs.items(), key=lambda kv: -len(str(kv[1])))

    def walk(value: Any, key: str | None) -> Any:
        if key in _FIXED_KEYS:
            return value
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, None) for v in value]
        if isinstance(value, str):
            for name, literal in ordered:
                if isinstance(literal, str) and literal in value:
                    value = value.replace(literal, f"{{{{inputs.{name}}}}}")
                    found.add(name)
            return value
        for name, literal in ordered:
            if not isinstance(literal, str) and type(literal) is type(value) and literal == value:
                found.add(name)
                return f"{{{{inputs.{name}}}}}"
        return value

    out = [walk(step, None) for step in steps]
    for name in inputs:
        if name not in found:
            raise InvalidField(
                f"inputs.{name}: its value does not occur in the session's steps",
                field=f"inputs.{name}",
            )
    return out
