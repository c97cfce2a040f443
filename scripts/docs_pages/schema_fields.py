"""A JSON Schema object's fields as table rows: name, type, default, bounds, description."""

from __future__ import annotations

import json
from typing import Any

BOUNDS = (
    ("minimum", ">= {}"),
    ("maximum", "<= {}"),
    ("exclusiveMinimum", "> {}"),
    ("minLength", "length >= {}"),
    ("maxLength", "length <= {}"),
    ("minItems", ">= {} items"),
    ("maxItems", "<= {} items"),
    ("maxProperties", "<= {} entries"),
    ("pattern", "matches `{}`"),
)


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def type_of(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        parts = [type_of(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts))
    if _ref_name(schema):
        return str(_ref_name(schema))
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items", {})
        if "discriminator" in items:
            return "list of steps"
        return f"list of {type_of(items)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {type_of(schema['additionalProperties'])}"
    return str(kind)


def bounds_of(schema: dict[str, Any]) -> str:
    found = []
    for option in [schema, *schema.get("anyOf", [])]:
        for key, text in BOUNDS:
            if key in option:
                found.append(text.format(option[key]))
    return ", ".join(dict.fromkeys(found))


def rows(schema: dict[str, Any], skip: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    required = set(schema.get("required", []))
    out: list[tuple[str, ...]] = []
    for name, field in schema.get("properties", {}).items():
        if name in skip:
            continue
        default = "required" if name in required else json.dumps(field.get("default"))
        out.append(
            (
                f"`{name}`",
                type_of(field),
                default,
                bounds_of(field),
                str(field.get("description", "")),
            )
        )
    return out
