"""Synthesize every stage offline, with cdk-nag and cfn-lint: ``make deploy-check``'s first gate.

    .venv/bin/python scripts/synth_check.py [--outdir cdk.out/deploy-check] [STAGE ...]

Each stage goes to ``OUTDIR/<stage>/`` (the worker smoke run reads prod's task definition
from there), with the deployment's own settings from ``pagefleet.deploy.json`` when it
exists, as ``cdk deploy`` reads them, and ``iam-synth.json`` beside the template: its
principals and the local counterparts of the resources their policies name (the smoke run
checks every call the worker makes against them, ``devstack.iam``). A synth fails on any
unacknowledged cdk-nag finding; cfn-lint must report no error or warning (W3005 aside: CDK
adds DependsOn next to GetAtt on purpose). The synth's warnings (e.g. prod's alarms with no
subscriber) are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
IAM_SYNTH = "iam-synth.json"


def synth_stage(stage: str, outdir: Path) -> tuple[Path, list[str]]:
    """Synthesize ``stage`` offline into ``outdir``: the template's path and the warnings."""
    from aws_cdk import cx_api as cxapi

    from infra.app import build_app

    app, stack = build_app(
        context={
            "pagefleet:stage": stage,
            "pagefleet:bundleDependencies": False,
            "pagefleet:inspectOnly": True,
        },
        outdir=str(outdir),
    )
    assembly = app.synth()  # raises on an unacknowledged cdk-nag finding
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    warnings = [
        f"{m.id}: {m.entry.data}"
        for m in artifact.messages
        if m.level == cxapi.SynthesisMessageLevel.WARNING
    ]
    template = Path(artifact.template_full_path)
    from devstack.iam.synth import record

    iam = record(stack, json.loads(template.read_text()))
    (template.parent / IAM_SYNTH).write_text(json.dumps(iam))
    return template, warnings


def lint(template: Path, region: str) -> list[str]:
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(template, config=ManualArgs(ignore_checks=["W3005"], regions=[region]))
    return [str(m) for m in matches]


def main(argv: list[str] | None = None) -> int:
    from infra.config import STAGES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, default=REPO_ROOT / "cdk.out" / "deploy-check")
    parser.add_argument("stages", nargs="*", default=list(STAGES))
    args = parser.parse_args(argv)
    failed = False
    for stage in args.stages:
        try:
            template, warnings = synth_stage(stage, args.outdir / stage)
        except Exception as exc:
            print(f"FAIL {stage}: synth: {exc}", file=sys.stderr)
            failed = True
            continue
        problems = lint(template, STAGES[stage].region or "us-east-1")
        if problems:
            print(f"FAIL {stage}: cfn-lint\n  " + "\n  ".join(problems), file=sys.stderr)
            failed = True
            continue
        for warning in warnings:
            print(f"warn {stage}: {warning}")
        print(f"ok   {stage}: synth, cdk-nag, cfn-lint clean  ({template})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
