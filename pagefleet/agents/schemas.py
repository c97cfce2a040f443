"""The step language as a compact JSON Schema, for tool inputs a model reads before its first
call.

The language's full schema (``GET /v1/workflow.schema.json``) is ~70,000 characters: every
step repeats the shared fields and the ``check`` block's eight read-only steps, with titles,
defaults and ``null`` branches. Here the shared fields are typed once, a check step is a
step whose action is one of the read-only eight, and each action's own fields are one line
of the step's description (a schema branch per action cost the tool list ~5,500
characters). It is made from the models, so it cannot drift from them; what it leaves to
the description or out (an action's fields, a field's cross-checks) the server checks with
the models and names the field.
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


def _kind(node: dict[str, Any]) -> str:
    """A field's type in a few characters: ``a|b`` one of, ``int 1..3``, ``[str]``, ``{x,y}``."""
    if "enum" in node:
        return "|".join(str(value) for value in node["enum"])
    if "$ref" in node:
        return "step"
    if "anyOf" in node:
        return "|".join(_kind(branch) for branch in node["anyOf"])
    kind = node.get("type")
    if kind == "integer" and "minimum" in node and "maximum" in node:
        return f"int {node['minimum']}..{node['maximum']}"
    if kind == "array":
        return f"[{_kind(node.get('items', {}))}]"
    if kind == "object" and "properties" in node:
        return "{" + ",".join(node["properties"]) + "}"
    if kind == "object" and "additionalProperties" in node:
        return "{name:" + _kind(node["additionalProperties"]) + "}"
    return {"integer": "int", "boolean": "bool", "string": "str"}.get(str(kind), "any")


def _field(name: str, node: dict[str, Any], required: bool) -> str:
    kind = _kind(node)
    text = name + ("*" if required else "") + ("" if kind == "str" else f": {kind}")
    said = node.get("description")
    return f"{text} ({said})" if said else text


def signature(model: dict[str, Any], defs: dict[str, Any]) -> str:
    """One action's own fields as one line of the step definition's description."""
    props = model["properties"]
    required = set(model.get("required", []))
    fields = [
        _field(name, compact(prop, defs), name in required)
        for name, prop in props.items()
        if name != "action" and name not in SHARED_FIELDS
    ]
    return f"{props['action']['const']}: " + "; ".join(fields)


# How the lines of the step definition's description read.
_LEGEND = (
    "one step; `action` says which. Each action's own fields (* required; a field with "
    "no type is a string; a|b: one of; m..n: a range; [x]: a list; {a,b}: an object), "
    "checked by the server, which names a wrong field:"
)


@functools.cache
def _defs() -> dict[str, Any]:
    full = TypeAdapter(Step).json_schema(ref_template="#/$defs/{model}")
    checks = TypeAdapter(CheckStep).json_schema(ref_template="#/$defs/{model}")
    defs = full.get("$defs", {})
    shared: dict[str, Any] = {}
    actions: list[str] = []
    lines = [_LEGEND]
    for model in _models(full):
        props = model["properties"]
        actions.append(props["action"]["const"])
        lines.append(signature(model, defs))
        for name in SHARED_FIELDS:
            if name in props:
                shared.setdefault(name, compact(props[name], defs))
    check_actions = [m["properties"]["action"]["const"] for m in _models(checks)]
    # The actions and the shared fields are typed; each action's own fields are a line of
    # the description (a oneOf branch per action cost ~5,500 characters of the tool list).
    step = {
        "type": "object",
        "description": "\n".join(lines),
        "required": ["action"],
        "properties": {"action": {"enum": actions}, **shared},
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
