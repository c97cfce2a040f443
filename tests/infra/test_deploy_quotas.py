"""CloudFormation's template quotas and Lambda's package size, checked at every synth
(infra/deploy_quotas.py): a stage CloudFormation or Lambda would refuse fails its synth,
naming what is over, instead of failing its deploy.

Before, nothing did: CDK writes a template of any size and number of resources, and the
deploy met CloudFormation's 500 resources (six pools make ~470) only when it was sent.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infra.deploy_quotas import (
    PACKAGE_MAX_BYTES,
    PACKAGE_RULE,
    SECTION_MAX,
    TEMPLATE_MAX_BYTES,
    TEMPLATE_RULE,
    DeployQuotaCheck,
    packages_over,
    template_excess,
    unzipped_bytes,
)

from .conftest import Synth

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def _report(tmp_path: Path, template: dict[str, Any]) -> Any:
    path = tmp_path / "pagefleet-prod.template.json"
    path.write_text(json.dumps(template))
    return DeployQuotaCheck().validate(SimpleNamespace(template_paths=[str(path)]))  # type: ignore[arg-type]


def _queues(count: int) -> dict[str, Any]:
    return {f"Queue{n}": {"Type": "AWS::SQS::Queue", "Properties": {}} for n in range(count)}


def test_a_template_over_cloudformations_quotas_fails_the_synth(tmp_path: Path) -> None:
    assert _report(tmp_path, {"Resources": _queues(SECTION_MAX["Resources"])}).success
    over = {
        "Resources": _queues(SECTION_MAX["Resources"] + 1),
        "Outputs": {f"Out{n}": {"Value": "x"} for n in range(SECTION_MAX["Outputs"] + 1)},
    }
    report = _report(tmp_path, over)
    assert not report.success
    found = sorted(v.description for v in report.violations)
    assert found == [
        "the stack's template has 201 outputs, over CloudFormation's 200",
        "the stack's template has 501 resources, over CloudFormation's 500",
    ]
    assert {v.rule_name for v in report.violations} == {TEMPLATE_RULE}


def test_a_template_body_over_a_megabyte_is_refused() -> None:
    assert template_excess({}, TEMPLATE_MAX_BYTES) == []
    assert template_excess({}, TEMPLATE_MAX_BYTES + 1) == [
        f"a template of {TEMPLATE_MAX_BYTES + 1} bytes, over CloudFormation's 1000000"
    ]


def _function(asset: str, *layers: str) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Metadata": {"aws:asset:path": asset},
        "Properties": {"Layers": [{"Ref": layer} for layer in layers]},
    }


def _layer(asset: str) -> dict[str, Any]:
    return {"Type": "AWS::Lambda::LayerVersion", "Metadata": {"aws:asset:path": asset}}


def test_a_functions_code_and_layers_over_250_mb_unzipped_fail_the_synth(tmp_path: Path) -> None:
    (tmp_path / "asset.code").mkdir()
    (tmp_path / "asset.code" / "handler.py").write_bytes(b"x" * 1000)
    (tmp_path / "asset.deps" / "python").mkdir(parents=True)
    big = tmp_path / "asset.deps" / "python" / "wheel.so"
    with big.open("wb") as out:  # sparse: its size without its disk
        out.truncate(PACKAGE_MAX_BYTES - 500)
    template = {
        "Resources": {
            "Deps": _layer("asset.deps"),
            "Api": _function("asset.code", "Deps"),
            "Small": _function("asset.code"),
        }
    }
    assert packages_over(template, tmp_path) == {"Api": PACKAGE_MAX_BYTES + 500}
    report = _report(tmp_path, template)
    [violation] = report.violations
    assert violation.rule_name == PACKAGE_RULE
    assert violation.violating_resources[0].resource_logical_id == "Api"
    assert str(PACKAGE_MAX_BYTES + 500) in violation.description
    os.truncate(big, PACKAGE_MAX_BYTES - 1000)
    assert packages_over(template, tmp_path) == {}


def test_a_zipped_layer_counts_what_it_unzips_to(tmp_path: Path) -> None:
    zipped = tmp_path / "asset.cli.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("aws/dist/data.bin", b"\0" * 3_000_000)
    assert zipped.stat().st_size < 100_000
    assert unzipped_bytes(zipped) == 3_000_000


def test_every_documented_stage_is_within_the_quotas(stage_synth: Synth) -> None:
    body = stage_synth.template_path.read_bytes()
    assert template_excess(stage_synth.raw, len(body)) == []
    assert packages_over(stage_synth.raw, stage_synth.template_path.parent) == {}
    # The headroom a stage's pools have: each adds ~27 resources.
    assert len(stage_synth.raw["Resources"]) < SECTION_MAX["Resources"] - 50


def test_the_quotas_are_cfn_lints() -> None:
    """cfn-lint (``make deploy-check``) keeps CloudFormation's limits; ours stay its own."""
    from cfnlint.helpers import LIMITS

    for section, most in SECTION_MAX.items():
        assert LIMITS[section]["number"] == most, section
    assert LIMITS["template"]["body"] == TEMPLATE_MAX_BYTES


def test_every_synth_runs_the_check() -> None:
    from aws_cdk import App

    from infra.app import validations

    assert any(isinstance(plugin, DeployQuotaCheck) for plugin in validations(App()))
