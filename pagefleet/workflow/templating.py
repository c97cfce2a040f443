"""``{{inputs.NAME}}`` and ``{{secrets.NAME}}`` references in step arguments.

Inputs are substituted in the worker right before a step runs; secrets are resolved there
too and never written back into the job record. Unknown inputs are refused at submit time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_REF = re.compile(r"\{\{\s*(inputs|secrets)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
MASK = "***"


def references(value: Any) -> Iterable[tuple[str, str]]:
    """Every (namespace, name) referenced anywhere inside a JSON-like value."""
    if isinstance(value, str):
        for match in _REF.finditer(value):
            yield match.group(1), match.group(2)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from references(item)


def render(value: Any, inputs: Mapping[str, Any], secrets: Mapping[str, str]) -> Any:
    """Substitute references in strings; a missing name raises KeyError naming it."""
    if isinstance(value, str):

        def _sub(match: re.Match[str]) -> str:
            namespace, name = match.group(1), match.group(2)
            source = inputs if namespace == "inputs" else secrets
            if name not in source:
                raise KeyError(f"{namespace}.{name}")
            return str(source[name])

        return _REF.sub(_sub, value)
    if isinstance(value, Mapping):
        return {k: render(v, inputs, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, inputs, secrets) for v in value]
    return value


def mask_secrets(text: str, secret_values: Iterable[str]) -> str:
    """Hide resolved secret values in text that may be echoed (errors, events, logs)."""
    for secret in sorted((s for s in secret_values if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
