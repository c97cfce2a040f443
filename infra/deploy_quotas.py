"""What CloudFormation and Lambda refuse at deploy that a synth does not: every synth checks.

CDK writes a template of any size and any number of resources, and a function asset of any
size; the deploy meets the quotas only in CloudFormation (the template, before anything is
made) or half way through (a function whose code and layers are too large, when Lambda is
asked to make it). A stage grows with its pools (each adds ~27 resources: six pools make
~470 of the 500 a stack may hold) and its options, so the quotas are checked at synth
(``DeployQuotaCheck``, a CDK validation plugin beside cdk-nag's):

- CloudFormation's template quotas ("Understand CloudFormation quotas",
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html):
  500 resources, 200 outputs, 200 parameters and 200 mappings a template, and a template
  body of 1 MB read from S3 (where CDK puts every template over 50 KB);
- Lambda's deployment package: 250 MB unzipped, its code and all its layers together
  ("Lambda quotas", https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html),
  measured on the assets the synth staged (in a deploy's assembly the dependency layer is
  the real one; in an inspection assembly a marker).
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import IPolicyValidationPlugin, PolicyViolation

from infra.template_checks import TemplateCheck, violation

# Each section's count, at most (CloudFormation's quotas for one template).
SECTION_MAX = {"Resources": 500, "Outputs": 200, "Parameters": 200, "Mappings": 200}
# A template body in S3: "1 MB" (counted as a million bytes: the smaller reading).
TEMPLATE_MAX_BYTES = 1_000_000
# Lambda: a function's code and layers, unzipped.
PACKAGE_MAX_BYTES = 250 * 1024 * 1024
TEMPLATE_RULE = "CloudFormationTemplateQuotas"
PACKAGE_RULE = "LambdaPackageSize"


def template_excess(template: Mapping[str, Any], size: int) -> list[str]:
    """What in ``template`` (``size`` bytes as written) CloudFormation would refuse."""
    found = [
        f"{len(template.get(section) or {})} {section.lower()}, over CloudFormation's {most}"
        for section, most in SECTION_MAX.items()
        if len(template.get(section) or {}) > most
    ]
    if size > TEMPLATE_MAX_BYTES:
        found.append(f"a template of {size} bytes, over CloudFormation's {TEMPLATE_MAX_BYTES}")
    return found


def unzipped_bytes(path: Path) -> int:
    """What a staged asset unzips to: its files' sizes (a zip asset: its entries')."""
    if path.is_file():
        with zipfile.ZipFile(path) as archive:
            return sum(entry.file_size for entry in archive.infolist())
    total = 0
    for root, _, files in os.walk(path):
        total += sum((Path(root) / name).stat().st_size for name in files)
    return total


def _asset(resource: Mapping[str, Any], assembly: Path) -> Path | None:
    where = (resource.get("Metadata") or {}).get("aws:asset:path")
    return assembly / str(where) if where else None


def packages_over(template: Mapping[str, Any], assembly: Path) -> dict[str, int]:
    """Each function whose code and layers unzip past Lambda's 250 MB: its size."""
    resources = template.get("Resources", {})
    sizes: dict[str, int] = {}  # asset path -> bytes, each measured once

    def size_of(logical_id: str) -> int:
        path = _asset(resources.get(logical_id) or {}, assembly)
        if path is None or not path.exists():
            return 0
        if str(path) not in sizes:
            sizes[str(path)] = unzipped_bytes(path)
        return sizes[str(path)]

    found: dict[str, int] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Lambda::Function":
            continue
        layers = resource.get("Properties", {}).get("Layers") or []
        named = [layer["Ref"] for layer in layers if isinstance(layer, dict) and "Ref" in layer]
        total = size_of(logical_id) + sum(size_of(layer) for layer in named)
        if total > PACKAGE_MAX_BYTES:
            found[logical_id] = total
    return found


@jsii.implements(IPolicyValidationPlugin)
class DeployQuotaCheck(TemplateCheck):
    """Fails a synth whose template CloudFormation, or whose functions Lambda, would refuse."""

    NAME = "pagefleet-deploy-quotas"
    RULES = (TEMPLATE_RULE, PACKAGE_RULE)

    def check(self, template_path: str) -> list[PolicyViolation]:
        body = Path(template_path).read_bytes()
        template = json.loads(body)
        found = [
            violation(
                TEMPLATE_RULE,
                f"the stack's template has {excess}",
                "fewer pools in the stage, or the stage split in two stacks",
                "(template)",
                template_path,
                [],
            )
            for excess in template_excess(template, len(body))
        ]
        assembly = Path(template_path).parent
        found += [
            violation(
                PACKAGE_RULE,
                f"the function's code and layers unzip to {size} bytes, over Lambda's "
                f"{PACKAGE_MAX_BYTES}",
                "fewer or smaller dependencies in the layer (uv.lock, no dev)",
                logical_id,
                template_path,
                ["Properties/Code", "Properties/Layers"],
            )
            for logical_id, size in packages_over(template, assembly).items()
        ]
        return found
