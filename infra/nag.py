"""cdk-nag (AwsSolutions) acknowledgments, made next to the resource they concern.

Every accepted finding goes through ``acknowledge`` with its reason, so
``grep -rn "acknowledge(" infra`` lists them all; an infra test checks that a synth leaves
no unacknowledged finding.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept AwsSolutions finding ``rule`` (e.g. ``IAM5[Resource::*]``) on ``scope``."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PACK}::{PACK}-{rule}", reason=reason))


def resource_text(scope: IConstruct, value: str) -> str:
    """``value`` (a token string such as an ARN) as cdk-nag spells it in a finding.

    Pseudo parameters and references become ``<AWS::Region>``, ``<LogicalId>``,
    ``<LogicalId.Attr>``; literals stay literal, so a region-bound stage (``arn:aws:...:
    ap-south-1:...``) and an agnostic one (``arn:<AWS::Partition>:...``) both match.
    """
    return _render(Stack.of(scope).resolve(value))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_render(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{resource}.{attribute}>"
    raise ValueError(f"cannot render {value!r} as cdk-nag does")
