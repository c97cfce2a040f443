"""``{{inputs.NAME}}``, ``{{secrets.NAME}}``, ``{{job.id}}``, ``{{job.idempotency_key}}`` and
``{{parents.<job id>.result.<path>}}``.

Inputs are substituted in the worker right before a step runs; secrets are resolved there
too and never written back into the job record. ``job`` names the job itself: its id, and
the Idempotency-Key it was submitted with, the same on every attempt (a unique reference
a workflow can put into a site's form, for the site's duplicate detection and for an
irreversible step's check to look for). A parent reference reads a field of the result of
a job this one depends on (``depends_on``), read by the worker when the job runs. Unknown
inputs, job fields, and parents the job does not depend on, are refused at submit time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pagefleet.ids import ULID_CHARS

_REF = re.compile(r"\{\{\s*(inputs|secrets|job)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PARENT = re.compile(r"\{\{\s*parents\.(" + ULID_CHARS + r")\.result((?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
# What ``{{job.NAME}}`` may name.
JOB_FIELDS = ("id", "idempotency_key")


def job_fields(job_id: str, idempotency_key: str | None) -> dict[str, str]:
    """The values of ``{{job.NAME}}`` for a job (no key: ``{{job.idempotency_key}}`` has
    none, and a job using it was refused at submit)."""
    values = {"id": job_id}
    if idempotency_key is not None:
        values["idempotency_key"] = idempotency_key
    return values


def references(value: Any) -> Iterable[tuple[str, str]]:
    """Every (namespace, name) referenced anywhere inside a JSON-like value; a parent
    reference is ``("parents", job_id)``."""
    if isinstance(value, str):
        for match in _REF.finditer(value):
            yield match.group(1), match.group(2)
        for match in _PARENT.finditer(value):
            yield "parents", match.group(1)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from references(item)


def literal_part(text: str) -> str:
    """``text`` with its references taken out: what it says before anything is filled in."""
    return _PARENT.sub("", _REF.sub("", text))


def referenced(values: Sequence[Any]) -> list[set[tuple[str, str]]]:
    """The references of each value, in one call (a workflow's steps, its options)."""
    return [set(references(value)) for value in values]


def render(
    value: Any,
    inputs: Mapping[str, Any],
    secrets: Mapping[str, str],
    parents: Mapping[str, Any] | None = None,
    job: Mapping[str, str] | None = None,
) -> Any:
    """Substitute references in strings; a missing name raises KeyError naming it.

    ``parents`` maps a parent job id to its result; a field that is an object or a list is
    substituted as JSON. ``job`` is ``job_fields`` of the job that runs.
    """
    if isinstance(value, str):
        sources: dict[str, Mapping[str, Any]] = {
            "inputs": inputs,
            "secrets": secrets,
            "job": job or {},
        }

        def _sub(match: re.Match[str]) -> str:
            namespace, name = match.group(1), match.group(2)
            source = sources[namespace]
            if name not in source:
                raise KeyError(f"{namespace}.{name}")
            return str(source[name])

        def _parent(match: re.Match[str]) -> str:
            job_id, path = match.group(1), match.group(2)
            found: Any = (parents or {}).get(job_id)
            where = f"parents.{job_id}.result"
            for part in [p for p in path.split(".") if p]:
                where += f".{part}"
                if isinstance(found, Mapping) and part in found:
                    found = found[part]
                elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                    found = found[int(part)]
                else:
                    raise KeyError(where)
            if found is None and job_id not in (parents or {}):
                raise KeyError(where)
            return json.dumps(found) if isinstance(found, dict | list) else str(found)

        return _PARENT.sub(_parent, _REF.sub(_sub, value))
    if isinstance(value, Mapping):
        return {k: render(v, inputs, secrets, parents, job) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, inputs, secrets, parents, job) for v in value]
    return value
