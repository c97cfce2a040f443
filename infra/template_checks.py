"""What the synth-time checks of the quotas AWS meets only at deploy share: a CDK validation
plugin over each synthesized template (``infra/function_env.py``,
``infra/deploy_quotas.py``), and the violation it reports."""

from __future__ import annotations

from aws_cdk import (
    IPolicyValidationContext,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
)


class TemplateCheck:
    """A validation plugin's body: ``check`` each template; subclasses name it (``NAME``,
    ``RULES``) and are decorated ``@jsii.implements(IPolicyValidationPlugin)``."""

    NAME = ""
    RULES: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.NAME

    @property
    def rule_ids(self) -> list[str]:
        return list(self.RULES)

    @property
    def version(self) -> str | None:
        return None

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        violations = [found for path in context.template_paths for found in self.check(path)]
        return PolicyValidationPluginReport(success=not violations, violations=violations)

    def check(self, template_path: str) -> list[PolicyViolation]:
        raise NotImplementedError


def violation(
    rule: str, description: str, fix: str, logical_id: str, path: str, locations: list[str]
) -> PolicyViolation:
    """One finding, on one resource of the template at ``path``."""
    return PolicyViolation(
        rule_name=rule,
        description=description,
        fix=fix,
        violating_resources=[
            PolicyViolatingResource(
                resource_logical_id=logical_id, template_path=path, locations=locations
            )
        ],
    )
