"""How a synth chooses its stage's configuration: CDK context names the stage, the deploy
file (``pagefleet.deploy.json``) adds the deployment's own settings, and context overrides
add a one-off change (infra/config.py says what each setting means).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from constructs import Node

from infra.config import STAGES, StageConfig

STAGE_CONTEXT_KEY = "pagefleet:stage"
OVERRIDES_CONTEXT_KEY = "pagefleet:overrides"
DEPLOY_FILE_CONTEXT_KEY = "pagefleet:deployFile"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY_FILE = REPO_ROOT / "pagefleet.deploy.json"
# Off for offline synth and tests; cdk.json turns it on so `cdk deploy` ships dependencies.
BUNDLE_CONTEXT_KEY = "pagefleet:bundleDependencies"
# An assembly synthesized without its Lambda dependencies is refused unless this says it is
# for inspection (tests, make synth, the deploy check): never for `cdk deploy`.
INSPECT_CONTEXT_KEY = "pagefleet:inspectOnly"


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        # An empty object replaces: `{"reserved_concurrency": {}}` reserves nothing.
        if value and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        elif key == "pools" and isinstance(value, list | dict):
            out[key] = _merge_pools(list(out.get(key) or ()), _pool_list(value))
        else:
            out[key] = value
    return out


def _pool_list(pools: list[Any] | dict[str, Any]) -> list[Any]:
    """The deploy file's pools as a list: the older spelling, an object by name
    (``{"heavy": {"max_tasks": 4}}``), still reads."""
    if isinstance(pools, dict):
        return [
            {**(pool if isinstance(pool, dict) else {}), "name": name}
            for name, pool in pools.items()
        ]
    return pools


def _merge_pools(base: list[dict[str, Any]], extra: list[Any]) -> list[dict[str, Any]]:
    """Pools merged by name: a pool named like one of the stage's changes the fields it
    gives, a new name adds a pool. None is dropped by leaving it out: that would delete its
    queues with the jobs waiting in them."""
    out = [dict(pool) for pool in base]
    for pool in extra:
        if not isinstance(pool, dict) or not isinstance(pool.get("name"), str):
            raise ValueError(f'each of "pools" needs a "name": {pool!r}')
        same = next((i for i, known in enumerate(out) if known.get("name") == pool["name"]), None)
        if same is None:
            out.append(pool)
        else:
            out[same] = _deep_merge(out[same], pool)
    return out


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def deploy_settings(path: Path, stage: str) -> dict[str, Any]:
    """The deploy file's settings for ``stage`` (none if the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f'{path}: expected {{"<stage>": {{<settings>}}, ...}}')
    unknown = sorted(set(data) - set(STAGES))
    if unknown:
        raise ValueError(f"{path} names unknown stages {unknown}; expected {sorted(STAGES)}")
    return dict(data.get(stage, {}))


def load_config(node: Node) -> StageConfig:
    """The stage config selected by CDK context: the stage's defaults, then the deploy file's
    settings for it, then any JSON overrides."""
    stage = str(node.try_get_context(STAGE_CONTEXT_KEY) or "dev")
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {sorted(STAGES)}")
    data = STAGES[stage].model_dump()
    deploy_file = node.try_get_context(DEPLOY_FILE_CONTEXT_KEY)
    path = REPO_ROOT / deploy_file if deploy_file else DEPLOY_FILE
    data = _deep_merge(data, deploy_settings(path, stage))
    overrides = node.try_get_context(OVERRIDES_CONTEXT_KEY)
    if isinstance(overrides, str):
        overrides = json.loads(overrides)
    if overrides:
        data = _deep_merge(data, overrides)
    bundle = node.try_get_context(BUNDLE_CONTEXT_KEY)
    if bundle is not None:
        data["bundle_dependencies"] = _as_bool(bundle)
    inspect = node.try_get_context(INSPECT_CONTEXT_KEY)
    if inspect is not None:
        data["inspect_only"] = _as_bool(inspect)
    return StageConfig.model_validate(data)
