"""What each function's environment weighs once deployed: Lambda takes 4 KB at most.

Lambda's quotas: "Environment variables: 4 KB, for all environment variables associated
with the function, in aggregate"
(https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html). The local
stack's functions take an environment of any size, and CloudFormation meets the limit only
when it writes the function, half way through a deploy that then rolls back. The size
grows with the stage: every pool adds three queues and its offer to the API's environment
(so functions get each queue by name, beside one URL prefix). So every synth checks it
(``EnvironmentSizeCheck``, a CDK validation plugin beside cdk-nag's): each reference in the
template counts at the longest value it can resolve to (a name CloudFormation generates is
the stack's name, the logical id and 13 characters, cut at the service's bound), and the
environment as the JSON object Lambda measures (its refusal quotes that object as the
"String measured"), escapes and all: more than the keys and values alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import IPolicyValidationPlugin, PolicyViolation

from infra.template_checks import TemplateCheck, violation

LAMBDA_ENV_MAX_BYTES = 4096
RULE = "LambdaEnvironmentSize"

# The longest values a pseudo parameter takes (regions such as ap-southeast-5; the China
# partition's URL suffix amazonaws.com.cn; the GovCloud partition's name).
_PSEUDO = {
    "AWS::Region": 15,
    "AWS::URLSuffix": 16,
    "AWS::AccountId": 12,
    "AWS::Partition": 10,
    "AWS::NoValue": 0,
}
# A generated physical name's bound, by resource type (each service's own name limit).
_NAME_MAX = {
    "AWS::SQS::Queue": 80,
    "AWS::DynamoDB::Table": 255,
    "AWS::S3::Bucket": 63,
    "AWS::Lambda::Function": 64,
    "AWS::IAM::Role": 64,
}
# arn:<partition>:<service>:<region>:<account>: before a resource's own part.
_ARN_PREFIX = len("arn:") + _PSEUDO["AWS::Partition"] + len(":service:") + _PSEUDO["AWS::Region"]
_ARN_PREFIX += 1 + _PSEUDO["AWS::AccountId"] + 1
# https://sqs.<region>.<URL suffix>/<account>/ before a queue's name.
_QUEUE_URL_PREFIX = len("https://sqs.") + _PSEUDO["AWS::Region"] + 1 + _PSEUDO["AWS::URLSuffix"]
_QUEUE_URL_PREFIX += 1 + _PSEUDO["AWS::AccountId"] + 1
# Anything else a reference may name: no value of ours comes near it.
_UNKNOWN = 256


def _generated_name(logical_id: str, cfn_type: str, stack_name: str) -> int:
    """How long a name CloudFormation generates for the resource can be."""
    generated = len(stack_name) + 1 + len(logical_id) + 1 + 13
    return min(generated, _NAME_MAX.get(cfn_type, _UNKNOWN))


def _name(logical_id: str, resource: Mapping[str, Any], stack_name: str) -> int:
    props = resource.get("Properties", {})
    for key in ("QueueName", "TableName", "BucketName", "FunctionName", "RoleName"):
        if isinstance(props.get(key), str):
            return len(props[key])
    return _generated_name(logical_id, resource["Type"], stack_name)


def _ref(target: str, resources: Mapping[str, Any], stack_name: str) -> int:
    if target in _PSEUDO:
        return _PSEUDO[target]
    if target == "AWS::StackName":
        return len(stack_name)
    resource = resources.get(target)
    if resource is None:
        return _UNKNOWN
    name = _name(target, resource, stack_name)
    if resource["Type"] == "AWS::SQS::Queue":
        return _QUEUE_URL_PREFIX + name
    if resource["Type"] == "AWS::ApiGatewayV2::Api":
        return 10  # an API id
    return name


def _get_att(target: str, attribute: str, resources: Mapping[str, Any], stack_name: str) -> int:
    resource = resources.get(target)
    if resource is None:
        return _UNKNOWN
    if attribute == "Arn":
        # arn:<partition>:<service>:<region>:<account>:<kind>/<name>, the longest kind ours use
        return _ARN_PREFIX + len("function:") + _name(target, resource, stack_name)
    if attribute == "QueueName":
        return _name(target, resource, stack_name)
    if attribute == "DomainName" and resource["Type"] == "AWS::CloudFront::Distribution":
        return len("d111111abcdef8.cloudfront.net")
    return _UNKNOWN


def widest(value: Any, resources: Mapping[str, Any], stack_name: str) -> str:
    """``value`` (a string or an intrinsic function) as long as it can resolve: its literal
    parts as they are (their quotes cost an escape each in the environment's JSON), each
    reference as that many characters."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, Mapping) and len(value) == 1:
        ((function, args),) = value.items()
        if function == "Ref":
            return "x" * _ref(args, resources, stack_name)
        if function == "Fn::GetAtt":
            return "x" * _get_att(args[0], args[1], resources, stack_name)
        if function == "Fn::Join":
            separator, parts = args
            return str(separator).join(widest(part, resources, stack_name) for part in parts)
    return "x" * _UNKNOWN


def environment_bytes(
    variables: Mapping[str, Any], resources: Mapping[str, Any], stack_name: str
) -> int:
    """The environment's size at most once deployed: the JSON object Lambda measures
    (its refusal quotes it as the "String measured")."""
    values = {name: widest(v, resources, stack_name) for name, v in variables.items()}
    return len(json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode())


def oversized(template: Mapping[str, Any], stack_name: str) -> dict[str, tuple[int, list[str]]]:
    """Each function whose environment may pass the limit: its size at most, and its
    largest variables (the ones to shorten) first."""
    resources = template.get("Resources", {})
    found: dict[str, tuple[int, list[str]]] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Lambda::Function":
            continue
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        size = environment_bytes(variables, resources, stack_name)
        if size > LAMBDA_ENV_MAX_BYTES:
            weights = {n: len(widest(v, resources, stack_name)) for n, v in variables.items()}
            heaviest = sorted(weights, key=lambda n: -weights[n])[:3]
            found[logical_id] = (size, [f"{n} ({weights[n]} bytes)" for n in heaviest])
    return found


@jsii.implements(IPolicyValidationPlugin)
class EnvironmentSizeCheck(TemplateCheck):
    """Fails a synth whose functions' environments Lambda would refuse."""

    NAME = "pagefleet-lambda-environment"
    RULES = (RULE,)

    def check(self, template_path: str) -> list[PolicyViolation]:
        template = json.loads(Path(template_path).read_text())
        stack_name = Path(template_path).name.removesuffix(".template.json")
        return [
            violation(
                RULE,
                f"the function's environment may reach {size} bytes once deployed, over "
                f"Lambda's {LAMBDA_ENV_MAX_BYTES} (largest: {', '.join(heaviest)})",
                "fewer pools in the stage, or shorter names (its stack, its pools)",
                logical_id,
                template_path,
                ["Properties/Environment/Variables"],
            )
            for logical_id, (size, heaviest) in oversized(template, stack_name).items()
        ]
