"""One offline synth of the dev stack per test session, shared by every infra test."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


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


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    from aws_cdk.assertions import Template

    from infra.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    # Offline: no dependency bundling, no Docker (the image is only staged), no credentials.
    app, stack = build_app(
        context={
            "pagefleet:stage": "dev",
            "pagefleet:bundleDependencies": False,
            "aws:cdk:enable-asset-metadata": True,  # lets tests find staged assets
        },
        outdir=str(outdir),
    )
    assembly = app.synth()  # raises if cdk-nag reports an unacknowledged finding
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    template_path = Path(artifact.template_full_path)
    raw = json.loads(template_path.read_text())
    return Synth(stack, Template.from_json(raw), raw, outdir, template_path)
