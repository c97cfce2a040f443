"""Offline synths shared by every infra test: one per stage per test session, made when a
test first asks for that stage.

``synth`` is the dev stage (most template assertions); ``stage_synth`` runs a test once per
stage in ``infra.config.STAGES``. Each stage is synthesized with exactly the context of its
command in docs/deploy.md and the committed example deploy file
(``pagefleet.deploy.example.json``, what the doc says to copy), never a developer's own
``pagefleet.deploy.json``: the documented deployment is the tested one.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DOC = REPO_ROOT / "docs" / "deploy.md"
EXAMPLE_DEPLOY_FILE = "pagefleet.deploy.example.json"


def _stage_names() -> list[str]:
    from infra.config import STAGES

    return list(STAGES)


def documented_deploy_contexts() -> dict[str, dict[str, str]]:
    """The ``-c key=value`` context of each ``cdk deploy`` command in docs/deploy.md, by
    stage (the doc's commands are single lines)."""
    out: dict[str, dict[str, str]] = {}
    for line in DEPLOY_DOC.read_text().splitlines():
        words = shlex.split(line) if " deploy " in line and "aws-cdk" in line else []
        if not words:
            continue
        context: dict[str, str] = {}
        for flag, value in pairwise(words):
            if flag in ("-c", "--context"):
                key, _, val = value.partition("=")
                context[key] = val
        out[context.get("pagefleet:stage", "dev")] = context
    return out


@dataclass(frozen=True)
class Synth:
    stack: Any  # infra.stacks.pagefleet_stack.PagefleetStack
    template: Any  # aws_cdk.assertions.Template
    raw: dict[str, Any]
    outdir: Path
    template_path: Path

    def resources(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.raw["Resources"].items() if v["Type"] == cfn_type}

    def props(self, cfn_type: str) -> list[dict[str, Any]]:
        return [r.get("Properties", {}) for r in self.resources(cfn_type).values()]

    @property
    def stage(self) -> str:
        return str(self.stack.config.stage)


def synthesize(stage: str, outdir: Path, extra: dict[str, Any] | None = None) -> Synth:
    from aws_cdk.assertions import Template

    from infra.app import build_app

    context: dict[str, Any] = {
        "pagefleet:stage": stage,
        "pagefleet:deployFile": EXAMPLE_DEPLOY_FILE,
        **documented_deploy_contexts().get(stage, {}),
        **(extra or {}),
        # Offline: no dependency bundling, no Docker (the image is only staged), no credentials.
        "pagefleet:bundleDependencies": False,
        "pagefleet:inspectOnly": True,
        "aws:cdk:enable-asset-metadata": True,  # lets tests find staged assets
    }
    app, stack = build_app(context=context, outdir=str(outdir))
    assembly = app.synth()  # raises if cdk-nag reports an unacknowledged finding
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    template_path = Path(artifact.template_full_path)
    raw = json.loads(template_path.read_text())
    return Synth(stack, Template.from_json(raw), raw, outdir, template_path)


class Synths:
    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._done: dict[str, Synth] = {}

    def get(self, stage: str) -> Synth:
        if stage not in self._done:
            self._done[stage] = synthesize(stage, self._factory.mktemp(f"cdk.out-{stage}"))
        return self._done[stage]


@pytest.fixture(scope="session")
def synths(tmp_path_factory: pytest.TempPathFactory) -> Synths:
    return Synths(tmp_path_factory)


@pytest.fixture(scope="session")
def synth(synths: Synths) -> Synth:
    return synths.get("dev")


@pytest.fixture(scope="session", params=_stage_names())
def stage_synth(request: pytest.FixtureRequest, synths: Synths) -> Synth:
    return synths.get(request.param)
