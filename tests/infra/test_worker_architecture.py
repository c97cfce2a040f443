"""Graviton workers by default; x86_64 still a per-stage choice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import synthesize

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def _task_architectures(synth: Any) -> set[str]:
    return {
        task["RuntimePlatform"]["CpuArchitecture"]
        for task in synth.props("AWS::ECS::TaskDefinition")
        if any(c["Name"] == "Worker" for c in task["ContainerDefinitions"])
    }


def _image_platforms(outdir: Path) -> set[str]:
    """The platform each worker image is built for (the assembly's asset manifests)."""
    platforms = set()
    for manifest in outdir.glob("*.assets.json"):
        for image in json.loads(manifest.read_text()).get("dockerImages", {}).values():
            platforms.add(image["source"].get("platform"))
    return platforms


def test_every_stage_runs_its_workers_on_arm64(stage_synth: Any) -> None:
    assert _task_architectures(stage_synth) == {"ARM64"}
    assert _image_platforms(stage_synth.outdir) == {"linux/arm64"}
    assert '"architecture": "arm64"' in _api_env(stage_synth)


def test_x86_64_stays_selectable_per_stage_and_per_pool(tmp_path: Path) -> None:
    """One synth for both choices: the stage on x86_64 (its heavy pool on Spot, which needs
    it), its standard pool back on Graviton by its own setting. Each task definition names
    its pool's architecture and pulls an image built for it."""
    overrides = json.dumps(
        {
            "worker_architecture": "x86_64",
            "pools": {"standard": {"architecture": "arm64"}, "heavy": {"spot": True}},
        }
    )
    synth = synthesize("dev", tmp_path, {"pagefleet:overrides": overrides})
    assert _task_architectures(synth) == {"ARM64", "X86_64"}
    assert _image_platforms(tmp_path) == {"linux/arm64", "linux/amd64"}
    tasks = synth.resources("AWS::ECS::TaskDefinition")
    for service in synth.props("AWS::ECS::Service"):
        task = tasks[service["TaskDefinition"]["Ref"]]["Properties"]
        arch = task["RuntimePlatform"]["CpuArchitecture"]
        providers = tuple(
            sorted(s["CapacityProvider"] for s in service["CapacityProviderStrategy"])
        )
        assert (arch, providers) in {("ARM64", ("FARGATE",)), ("X86_64", ("FARGATE_SPOT",))}
    # The API prices usage on the architecture the standard pool runs on.
    assert '"architecture": "arm64"' in _api_env(synth)


def _api_env(synth: Any) -> str:
    (api,) = (
        f
        for f in synth.props("AWS::Lambda::Function")
        if f.get("Handler") == "functions.api.handler.handler"
    )
    return json.dumps(api["Environment"]["Variables"]).replace('\\"', '"')
