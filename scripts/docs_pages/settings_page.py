"""The deployment settings reference: every field a stage's object in pagefleet.deploy.json
may hold, from the settings models of infra/config.py.

Type and bounds come from each model's JSON Schema, the default of each stage from
``STAGES``, and the meaning from the field's description or, where it has none, the comment
right above it in the model's source: the text a reader of infra/config.py sees is the text
of the page. A field with neither fails the generator (``MissingMeaning``), so a new setting
cannot reach a deploy file undocumented.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from typing import Any

from docs_pages.schema_fields import bounds_of, type_of
from docs_pages.table import code, table


class MissingMeaning(ValueError):
    pass


def comments_above_fields(model: type) -> dict[str, str]:
    """Each annotated field's comment block (the ``#`` lines right above it), as one line."""
    source = textwrap.dedent(inspect.getsource(model))
    lines = source.splitlines()
    out: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        above: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#"):
            above.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        if above:
            out[node.target.id] = " ".join(above)
    return out


def _value(value: Any) -> str:
    nested = value.values() if isinstance(value, dict) else [value]
    if any(hasattr(v, "model_dump") for v in nested) and not isinstance(value, tuple):
        return "below"  # a model of its own, with its own table
    if isinstance(value, tuple) and value and all(hasattr(v, "name") for v in value):
        return "below"  # named models (the pools), each in the table below
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, tuple):
        value = [v.model_dump(mode="json") if hasattr(v, "model_dump") else v for v in value]
    return code(json.dumps(value))


def field_rows(model: Any, values: dict[str, Any] | None = None) -> list[tuple[str, ...]]:
    """(field, type, bounds, default per stage..., meaning) for every field of ``model``.
    ``values``: stage -> that stage's instance (a default column each); none: the model's."""
    schema = model.model_json_schema()
    comments = comments_above_fields(model)
    rows = []
    for name, info in model.model_fields.items():
        meaning = info.description or comments.get(name)
        if not meaning:
            raise MissingMeaning(f"{model.__name__}.{name} has no description or comment")
        prop = schema["properties"][name]
        if values:
            defaults = [_value(getattr(v, name)) for v in values.values()]
        elif info.is_required():
            defaults = ["required"]
        else:
            defaults = [_value(info.get_default(call_default_factory=True))]
        rows.append((code(name), type_of(prop), bounds_of(prop), *defaults, meaning))
    return rows


def settings() -> str:
    from infra.config import STAGES, ConsoleConfig, StageConfig
    from infra.pool_config import AgeStep, PoolConfig

    stages = list(STAGES)
    heads = ("field", "type", "bounds")
    per_stage = (*heads, *(f"`{s}`" for s in stages), "meaning")
    pools = {f"{s}: {pool.name}": pool for s in stages for pool in STAGES[s].pools}
    pool_defaults = table(
        ("pool", "cpu", "memory_mib", "concurrency", "min_tasks", "max_tasks", "spot", "isolation"),
        [
            (
                code(key),
                p.cpu,
                p.memory_mib,
                p.concurrency,
                p.min_tasks,
                p.max_tasks,
                code(json.dumps(p.spot)),
                code(p.isolation),
            )
            for key, p in pools.items()
        ],
    )
    return (
        "# Deployment settings (`pagefleet.deploy.json`)\n\n"
        "Every field a stage's object in `pagefleet.deploy.json` may hold "
        '(`{"<stage>": {...}}`, docs/deploy.md), with its type, bounds, the default of each '
        "stage and what it does. Objects merge into the stage's defaults; an empty object "
        "replaces (`\"reserved_concurrency\": {}`). `-c 'pagefleet:overrides={...}'` "
        "merges the same fields for one command. An unknown field or a value out of bounds "
        "fails the synth, naming it.\n\n"
        "## A stage\n\n"
        + table(per_stage, field_rows(StageConfig, {s: STAGES[s] for s in stages}))
        + "\n## A pool (`pools[]`)\n\n"
        "`pools` is a list; each pool has a `name` of its own. A deploy file's pools merge "
        "by name into the stage's: a pool named like one of the stage's changes the fields "
        'it gives (`{"name": "heavy", "max_tasks": 10}`), a new name adds a pool with '
        "its own queues, service, scaling and alarms. A pool left out is kept (dropping one "
        "would delete its queues with the jobs waiting in them). Each stage's pools:\n\n"
        + pool_defaults
        + "\nEvery field of a pool (the defaults are the fields' own where the table above "
        "does not set them):\n\n"
        + table((*heads, "default", "meaning"), field_rows(PoolConfig))
        + "\n### A scaling step (`pools[].age_steps[]`)\n\n"
        + table((*heads, "default", "meaning"), field_rows(AgeStep))
        + "\n## The web console (`console`)\n\n"
        + table(per_stage, field_rows(ConsoleConfig, {s: STAGES[s].console for s in stages}))
        + "\n## Tenant defaults (`tenant_defaults`)\n\n"
        "The limits of a tenant an admin set none for: each field and each stage's value "
        "are in [the limits reference](limits.md#tenant-limits-by-stage).\n"
    )
