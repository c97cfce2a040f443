"""``expect``: what a job's result must look like, or the run is a ``data_quality`` failure.

A JSON Schema (any draft ``jsonschema`` knows; 2020-12 when ``$schema`` is absent) and two
shorthands for what breaks most often when a site changes: ``min_items`` (a list has at
least N entries) and ``not_empty`` (a value is present and not empty). The schema is
checked when the job is submitted (a bad one is a 422 on ``expect.schema``); the result is
checked by the worker when the steps are done.

``$ref`` may only point inside the schema: a remote reference would make the worker fetch
a URL a tenant chose, outside the egress proxy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# What a breach report keeps: enough to act on, bounded for the job record.
MAX_BREACHES = 20
REASON_MAX_CHARS = 200
PATH_PATTERN = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"
ResultPath = str


class Expect(BaseModel):
    """``expect``: the result's JSON Schema and shorthands; a run whose result breaks them
    ends ``failed`` (``error.kind`` ``data_quality``), not retried unless ``retry``."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        defer_build=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    json_schema: dict[str, Any] | None = Field(
        default=None,
        alias="schema",
        description="a JSON Schema the whole result must validate against",
    )
    min_items: dict[ResultPath, int] = Field(
        default_factory=dict,
        max_length=50,
        description='result path -> fewest entries, e.g. {"products": 1}',
    )
    not_empty: list[ResultPath] = Field(
        default_factory=list,
        max_length=50,
        description='result paths that must be present and not empty, e.g. ["title"]',
    )
    retry: bool = Field(
        default=False,
        description="retry a run that breaks the expectations (default: fail at once)",
    )

    @field_validator("json_schema")
    @classmethod
    def _usable_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            problem = schema_problem(schema)
            if problem is not None:
                raise ValueError(problem)
        return schema

    @field_validator("min_items")
    @classmethod
    def _counts(cls, counts: dict[str, int]) -> dict[str, int]:
        for path, count in counts.items():
            _check_path(path)
            if not 0 <= count <= 100_000:
                raise ValueError(f"min_items.{path} must be between 0 and 100000")
        return counts

    @field_validator("not_empty")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            _check_path(path)
        return paths

    @model_validator(mode="after")
    def _says_something(self) -> Expect:
        if self.json_schema is None and not self.min_items and not self.not_empty:
            raise ValueError("expect needs a schema, min_items or not_empty")
        return self


@dataclass(frozen=True)
class Breach:
    """One way the result is wrong: where (``result.products``) and why."""

    path: str
    reason: str

    def as_detail(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


# A schema's ``pattern`` searched in a value: (pattern, text) -> found. It raises
# ``TimeoutError`` when the search ran out of its time (the worker's bounds them: the result
# is page data, the pattern the tenant's, and ``re`` would hold every thread of the worker).
PatternSearch = Callable[[str, str], bool]


def breaches(
    result: dict[str, Any], expect: Expect, *, search: PatternSearch | None = None
) -> list[Breach]:
    """Every way ``result`` breaks ``expect`` (shorthands first), at most ``MAX_BREACHES``.
    ``search``: how a schema's patterns are searched (None: jsonschema's own, ``re``)."""
    found: list[Breach] = []
    for path, fewest in expect.min_items.items():
        value, present = _lookup(result, path)
        if not present:
            found.append(Breach(_shown(path), "is missing"))
        elif not isinstance(value, list):
            found.append(Breach(_shown(path), f"is {_kind(value)}, not a list"))
        elif len(value) < fewest:
            found.append(
                Breach(_shown(path), f"has {len(value)} items, expected at least {fewest}")
            )
    for path in expect.not_empty:
        value, present = _lookup(result, path)
        if not present:
            found.append(Breach(_shown(path), "is missing"))
        elif value is None or value == "" or value == [] or value == {}:
            found.append(Breach(_shown(path), f"is empty ({json.dumps(value)})"))
    if expect.json_schema is not None:
        found += _schema_breaches(result, expect.json_schema, search)
    return found[:MAX_BREACHES]


def summary(found: list[Breach]) -> str:
    """The error message: how many breaches, and the first few in words."""
    head = "; ".join(f"{b.path} {b.reason}" for b in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return f"the result does not meet expect: {head}{more}"


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` cannot be used, or None. Checked against its own meta-schema."""
    from jsonschema.exceptions import SchemaError

    remote = _remote_ref(schema)
    if remote is not None:
        return (
            f"$ref {remote!r} points outside the schema; only references inside it "
            "(#/...) are allowed: remote schemas are never fetched"
        )
    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"not a valid JSON Schema{f' at {where}' if where else ''}: {_clip(exc.message)}"
    return None


def _schema_breaches(
    result: dict[str, Any], schema: dict[str, Any], search: PatternSearch | None
) -> list[Breach]:
    validator = _validator(schema, search)
    errors = sorted(validator.iter_errors(result), key=lambda e: list(map(str, e.absolute_path)))
    return [Breach(_result_path(list(e.absolute_path)), _clip(e.message)) for e in errors]


def _validator(schema: dict[str, Any], search: PatternSearch | None = None) -> Validator:
    from referencing import Registry

    cls = _validator_class(schema)
    if search is not None:
        cls = _searching_with(cls, search)
    # An empty registry retrieves nothing: a remote $ref fails instead of being fetched
    # (jsonschema's default registry would still fetch it, with a warning).
    return cls(schema, registry=Registry(), format_checker=cls.FORMAT_CHECKER)


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    # jsonschema is imported on first use: most jobs carry no schema (cold starts).
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    found: type[Validator] = validator_for(schema, default=Draft202012Validator)
    return found


def _searching_with(cls: type[Validator], search: PatternSearch) -> type[Validator]:
    """``cls`` whose ``pattern`` and ``patternProperties`` search with ``search``; a search
    that ran out of time is a breach saying so."""
    from jsonschema import ValidationError
    from jsonschema.validators import extend

    def too_slow(patrn: str) -> ValidationError:
        return ValidationError(
            f"could not be checked against pattern {patrn!r}: the search ran out of time "
            "(the pattern backtracks without end on this value)"
        )

    def pattern(validator: Validator, patrn: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string"):
            try:
                if not search(patrn, instance):
                    yield ValidationError(f"{instance!r} does not match {patrn!r}")
            except TimeoutError:
                yield too_slow(patrn)

    def pattern_properties(validator: Validator, patterns: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                try:
                    found = search(patrn, key)
                except TimeoutError:
                    yield too_slow(patrn)
                    continue
                if found:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    bounded: type[Validator] = extend(
        cls, {"pattern": pattern, "patternProperties": pattern_properties}
    )
    return bounded


def _remote_ref(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("$ref", "$dynamicRef") and isinstance(inner, str):
                if not inner.startswith("#"):
                    return inner
            elif (found := _remote_ref(inner)) is not None:
                return found
    elif isinstance(value, list):
        for inner in value:
            if (found := _remote_ref(inner)) is not None:
                return found
    return None


def _check_path(path: str) -> None:
    import re

    if not re.match(PATH_PATTERN, path) or len(path) > 200:
        raise ValueError(f"{path!r} is not a result path (names joined by dots, e.g. page.items)")


def _lookup(result: Any, path: str) -> tuple[Any, bool]:
    value = result
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None, False
        value = value[part]
    return value, True


def _shown(path: str) -> str:
    return f"result.{path}"


def _result_path(parts: list[Any]) -> str:
    out = "result"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an object" if isinstance(value, dict) else "a string"


def _clip(text: str) -> str:
    return text if len(text) <= REASON_MAX_CHARS else text[: REASON_MAX_CHARS - 1] + "…"
