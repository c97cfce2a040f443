"""The step language as a compact JSON Schema, for tool inputs a model reads before its first
call.

The language's full schema (``GET /v1/workflow.schema.json``) is ~70,000 characters: every
step repeats the shared fields and the ``check`` block's eight read-only steps, with titles,
defaults and ``null`` branches. Here the shared fields are said once, each action lists only
its own fields, a check step is a step whose action is one of the read-only eight, and a
paginate's block refers back to the one step definition. It is made from the models, so it
cannot drift from them; what it leaves out (a field's cross-checks, such as assert needing
exactly one test) the server checks with the models and names the field.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from pydantic import TypeAdapter

from pagefleet.workflow import CheckStep, Step

STEP_REF = {"$ref": "#/$defs/step"}
CHECK_STEP_REF = {"$ref": "#/$defs/check_step"}
# The fields every step has; said once, in the step definition's own properties.
SHARED_FIELDS = ("label", "timeout_ms", "irreversible", "check", "frame")
# Bounds on lengths and counts, and the patterns of names, are the server's to check (its
# refusal names the field); the schema keeps what a model needs to write a step: names,
# types, choices, numeric ranges.
_DROPPED = {
    "title",
    "default",
    "discriminator",
    "examples",
    "$schema",
    "$id",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "pattern",
}
# Said once in the tool's description (or by the field's pattern) instead of on every field.
_SAID_ELSEWHERE = {
    "A Playwright selector (CSS, text=, xpath=...)",
    "Artifact file name: letters, digits, dot, dash, underscore",
}


def _step_union(node: dict[str, Any], step_ref: dict[str, Any]) -> dict[str, Any] | None:
    """The compact reference that replaces a nested union of steps, else None."""
    mapping = node.get("discriminator", {}).get("mapping", {})
    if "goto" not in mapping:
        return None
    return step_ref if "click" in mapping else CHECK_STEP_REF


def compact(
    node: Any,
    defs: dict[str, Any],
    *,
    step_ref: dict[str, Any] = STEP_REF,
    depth: int | None = None,
) -> Any:
    """``node`` without titles, defaults and null branches, its references inlined.

    ``depth``: how many levels of objects keep their properties; an object below them is
    said as its field names (the server checks it whole and names a wrong field).
    """
    if isinstance(node, list):
        return [compact(item, defs, step_ref=step_ref, depth=depth) for item in node]
    if not isinstance(node, dict):
        return node
    union = _step_union(node, step_ref)
    if union is not None:
        return union
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {k: v for k, v in target.items() if k != "description"}
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        return compact(merged, defs, step_ref=step_ref, depth=depth)
    if depth is not None and depth < 0 and "properties" in node:
        names = ", ".join(node["properties"])
        said = node.get("description", "an object")  # a field's own words, else generic
        return {"type": "object", "description": f"{said} (fields: {names})"}
    inner = None if depth is None else depth - 1 if "properties" in node else depth
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or (key == "description" and value in _SAID_ELSEWHERE):
            continue
        if key == "type" and "enum" in node:  # the values say their type
            continue
        if key == "anyOf":
            branches = [b for b in value if b != {"type": "null"}]
            if len(branches) == 1:
                out.update(compact(branches[0], defs, step_ref=step_ref, depth=depth))
                continue
            value = branches
        if key == "properties":
            out[key] = {
                name: compact(prop, defs, step_ref=step_ref, depth=inner)
                for name, prop in value.items()
            }
        else:
            out[key] = compact(value, defs, step_ref=step_ref, depth=depth)
    return out


def _models(adapter_schema: dict[str, Any]) -> list[dict[str, Any]]:
    defs = adapter_schema.get("$defs", {})
    return [defs[ref["$ref"].rsplit("/", 1)[-1]] for ref in adapter_schema["oneOf"]]


@functools.cache
def _defs() -> dict[str, Any]:
    full = TypeAdapter(Step).json_schema(ref_template="#/$defs/{model}")
    checks = TypeAdapter(CheckStep).json_schema(ref_template="#/$defs/{model}")
    defs = full.get("$defs", {})
    shared: dict[str, Any] = {}
    branches: list[dict[str, Any]] = []
    actions: list[str] = []
    for model in _models(full):
        props = model["properties"]
        action = props["action"]["const"]
        actions.append(action)
        own: dict[str, Any] = {"action": {"const": action}}
        for name, prop in props.items():
            if name in SHARED_FIELDS:
                shared.setdefault(name, compact(prop, defs))
            elif name != "action":
                # A step's own object fields (positions, files, record fields) are said by
                # their field names: the server checks them whole and names a wrong one.
                own[name] = compact(prop, defs, depth=-1)
        branch: dict[str, Any] = {"properties": own}
        required = [r for r in model.get("required", []) if r != "action"]
        if required:
            branch["required"] = required
        branches.append(branch)
    check_actions = [m["properties"]["action"]["const"] for m in _models(checks)]
    step = {
        "type": "object",
        "description": "one step of the workflow language; `action` says which",
        "required": ["action"],
        "properties": {"action": {"enum": actions}, **shared},
        "oneOf": branches,
    }
    check_step = {
        "description": "a read-only step (no irreversible, no check of its own)",
        "allOf": [STEP_REF],
        "properties": {"action": {"enum": check_actions}},
    }
    return {"step": step, "check_step": check_step}


def step_defs() -> dict[str, Any]:
    """The ``$defs`` a tool's input schema carries to refer to ``#/$defs/step``."""
    return copy.deepcopy(_defs())


def actions() -> list[str]:
    return list(_defs()["step"]["properties"]["action"]["enum"])
