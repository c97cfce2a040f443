"""CDK entry point: ``python -m infra.app`` (what cdk.json runs, and what `make synth` runs).

Synthesis is offline: no Docker (the worker image is only staged), no AWS credentials (the
stack is environment-agnostic), no network unless ``pagefleet:bundleDependencies`` is on.
cdk-nag's AwsSolutions pack validates every synth.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import load_config
from infra.stacks.pagefleet_stack import PagefleetStack

REPO_ROOT = Path(__file__).resolve().parents[1]


def stack_name(stage: str) -> str:
    return f"pagefleet-{stage}"


def feature_flags() -> dict[str, Any]:
    """cdk.json's CDK feature flags, so a direct synth (tests, `make synth`) builds the same
    template as the CLI. Its ``pagefleet:*`` keys are left to the CLI: run directly, the
    stage defaults to dev and dependencies are not bundled (offline)."""
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return {k: v for k, v in context.items() if not k.startswith("pagefleet:")}


def build_app(
    context: dict[str, Any] | None = None, outdir: str | None = None
) -> tuple[App, PagefleetStack]:
    app = App(context={**feature_flags(), **(context or {})}, outdir=outdir)
    config = load_config(app.node)
    stack = PagefleetStack(
        app,
        stack_name(config.stage),
        config=config,
        description=f"pagefleet {config.stage}: serverless browser automation",
        # Account-agnostic always (offline synth); region-bound where the stage says so.
        env=Environment(region=config.region) if config.region else None,
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


def main() -> None:
    # Under the CDK CLI, CDK_OUTDIR is set; run directly, write ./cdk.out like the CLI would.
    outdir = os.environ.get("CDK_OUTDIR") or str(REPO_ROOT / "cdk.out")
    app, _ = build_app(outdir=outdir)
    app.synth()


if __name__ == "__main__":
    main()
