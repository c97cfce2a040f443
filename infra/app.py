"""CDK entry point: ``python -m infra.app`` (what cdk.json runs, and what `make synth` runs).

Synthesis is offline: no Docker (the worker image is only staged), no AWS credentials (the
stack is environment-agnostic), no network unless ``pagefleet:bundleDependencies`` is on.
Run directly, dependencies are not bundled, so the run must say it is for inspection:
``python -m infra.app -c pagefleet:inspectOnly=true`` (what `make synth` runs).
cdk-nag's AwsSolutions pack validates every synth, and so does the functions' environment size
(infra/function_env.py: Lambda takes 4 KB at most), and CloudFormation's template quotas and
Lambda's package size (infra/deploy_quotas.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.deploy_file import load_config
from infra.deploy_quotas import DeployQuotaCheck
from infra.function_env import EnvironmentSizeCheck
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
    Validations.of(app).add_plugins(*validations(app))
    return app, stack


def validations(app: App) -> list[Any]:
    """What checks every synth: cdk-nag's pack, Lambda's environment size, and the quotas
    CloudFormation and Lambda meet only at deploy."""
    return [AwsSolutionsChecks(app, verbose=True), EnvironmentSizeCheck(), DeployQuotaCheck()]


def cli_context(argv: list[str]) -> dict[str, str]:
    """``-c key=value`` pairs, as the CDK CLI takes them (for a direct run: `make synth`)."""
    parser = argparse.ArgumentParser(prog="python -m infra.app")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    out: dict[str, str] = {}
    for pair in parser.parse_args(argv).context:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"context {pair!r} is not KEY=VALUE")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> None:
    # Under the CDK CLI, CDK_OUTDIR is set; run directly, write ./cdk.out like the CLI would.
    outdir = os.environ.get("CDK_OUTDIR") or str(REPO_ROOT / "cdk.out")
    app, _ = build_app(context=cli_context(sys.argv[1:] if argv is None else argv), outdir=outdir)
    app.synth()


if __name__ == "__main__":
    main()
