"""cdk-nag (AwsSolutions) acknowledgments, made next to the resource they concern.

Every accepted finding goes through ``acknowledge`` with its reason, so
``grep -rn "acknowledge(" infra`` lists them all; an infra test checks that a synth leaves
no unacknowledged finding.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept AwsSolutions finding ``rule`` (e.g. ``IAM5[Resource::*]``) on ``scope``."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PACK}::{PACK}-{rule}", reason=reason))
