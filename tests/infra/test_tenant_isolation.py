"""Isolation below the code: the job role the worker assumes per tenant reaches only that
tenant's objects, usage items and secrets; the worker's own roles reach none of them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pagefleet.specs.resources import TENANT_SESSION_TAG

from .helpers import as_list, logical_id, statements

pytestmark = [pytest.mark.infra, pytest.mark.slow]

TAGGED = "${aws:PrincipalTag/" + TENANT_SESSION_TAG + "}"


def _join(value: Any) -> str:
    """A resource as text: Fn::Join parts concatenated, references as <LogicalId>."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_join(p) for p in value["Fn::Join"][1])
    if "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if "Ref" in value:
        return f"<{value['Ref']}>"
    raise AssertionError(value)


def _policies_of(synth, role: Any) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    ref = {"Ref": logical_id(role)}
    return [p for p in synth.props("AWS::IAM::Policy") if ref in p["Roles"]]


def test_the_job_role_reaches_only_the_tagged_tenants_data(stage_synth) -> None:
    stack = stage_synth.stack
    role = stack.tenants.role
    bucket = logical_id(stack.artifacts.bucket)
    usage = logical_id(stack.store.usage)
    jobs = logical_id(stack.store.jobs)
    granted = [s for p in _policies_of(stage_synth, role) for s in statements(p)]
    services = {a.split(":")[0] for s in granted for a in as_list(s["Action"])}
    assert services == {"s3", "dynamodb", "secretsmanager"}
    # It may list its own prefix: without that S3 answers a session never saved 403.
    assert [as_list(s["Action"]) for s in granted].count(["s3:ListBucket"]) == 1
    for statement in granted:
        assert statement["Effect"] == "Allow"
        actions = as_list(statement["Action"])
        resources = [_join(r) for r in as_list(statement["Resource"])]
        if actions == ["s3:ListBucket"]:
            # Listing the tenant's own prefix only: S3 then answers a missing key (a session
            # never saved) 404, not 403.
            assert resources == [f"<{bucket}.Arn>"]
            assert statement["Condition"] == {"StringLike": {"s3:prefix": [f"{TAGGED}/*"]}}
        elif actions[0].startswith("s3:"):
            # Objects under the tenant's own prefix only: artifacts and saved sessions.
            assert resources == [f"<{bucket}.Arn>/{TAGGED}/*"]
            assert set(actions) <= {"s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"}
        elif actions[0].startswith("dynamodb:") and resources == [f"<{jobs}.Arn>"]:
            # The tenant's browser-session commands: their own partition of the jobs table
            # (never its job items, whose partition is TENANT#<tenant>).
            assert statement["Condition"] == {
                "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"SCMD#{TAGGED}"]}
            }
            assert not {"dynamodb:Scan", "dynamodb:BatchGetItem"} & set(actions)
        elif actions[0].startswith("dynamodb:"):
            # Items whose partition key is the tenant's, in the usage table.
            assert resources == [f"<{usage}.Arn>"]
            assert statement["Condition"] == {
                "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TENANT#{TAGGED}"]}
            }
            assert not {"dynamodb:Scan", "dynamodb:BatchGetItem"} & set(actions)
        else:
            assert actions == ["secretsmanager:GetSecretValue"]
            (secret,) = resources
            assert secret.endswith(f":secret:pagefleet/{stage_synth.stage}/{TAGGED}/*")


def test_only_the_worker_task_roles_assume_it_and_only_with_a_tenant_tag(stage_synth) -> None:
    stack = stage_synth.stack
    role = stage_synth.raw["Resources"][logical_id(stack.tenants.role)]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    condition = trust["Condition"]
    task_roles = [
        {"Fn::GetAtt": [logical_id(pool.task_definition.task_role), "Arn"]}
        for pool in stack.workers.pools.values()
    ]
    assert condition["ArnEquals"]["aws:PrincipalArn"] == task_roles
    assert condition["StringLike"] == {f"aws:RequestTag/{TENANT_SESSION_TAG}": "?*"}
    assert condition["ForAllValues:StringEquals"] == {"aws:TagKeys": [TENANT_SESSION_TAG]}
    assert role["MaxSessionDuration"] == 3600


def test_workers_reach_no_artifact_session_or_secret_themselves(stage_synth) -> None:
    stack = stage_synth.stack
    job_role = logical_id(stack.tenants.role)
    for pool in stack.workers.pools.values():
        task_role = pool.task_definition.task_role
        granted = [s for p in _policies_of(stage_synth, task_role) for s in statements(p)]
        actions = {a for s in granted for a in as_list(s["Action"])}
        assert not {a for a in actions if a.startswith(("s3:", "secretsmanager:", "kms:"))}
        assuming = [s for s in granted if "sts:AssumeRole" in as_list(s["Action"])]
        assert [s["Resource"] for s in assuming] == [{"Fn::GetAtt": [job_role, "Arn"]}]
        worker = pool.task_definition.default_container
        assert worker is not None
        env = json.dumps(
            stage_synth.raw["Resources"][logical_id(pool.task_definition)]["Properties"]
        )
        assert "PAGEFLEET_JOB_ROLE_ARN" in env and job_role in env
        assert "PAGEFLEET_USAGE_TABLE" in env and "PAGEFLEET_TENANT_DEFAULTS" in env


def test_every_runtime_gets_the_tenant_limits_and_usage_table(stage_synth) -> None:
    usage = logical_id(stage_synth.stack.store.usage)
    for function in stage_synth.props("AWS::Lambda::Function"):
        variables = function.get("Environment", {}).get("Variables", {})
        if "PAGEFLEET_QUEUE_URLS" not in variables:
            continue  # not a CoreSettings runtime: the authorizer, live, webhooks, CDK's own
        assert variables["PAGEFLEET_USAGE_TABLE"] == {"Ref": usage}
        defaults = json.loads(variables["PAGEFLEET_TENANT_DEFAULTS"])
        assert defaults == stage_synth.stack.config.tenant_defaults.model_dump()


def test_tenants_refused_too_often_raise_an_alarm(stage_synth) -> None:
    alarm = stage_synth.raw["Resources"][logical_id(stage_synth.stack.tenants.refusals_alarm)]
    props = alarm["Properties"]
    assert props["MetricName"] == "TenantRefusals"
    assert props["Threshold"] == stage_synth.stack.config.tenant_refusals_alarm_count
    assert "tenant-refusals" in props["AlarmDescription"]


def test_private_workers_reach_sts_without_the_internet(stage_synth) -> None:
    if stage_synth.stack.config.egress != "nat":
        return  # public subnets: STS over the internet gateway, as every AWS API
    services = [json.dumps(e["ServiceName"]) for e in stage_synth.props("AWS::EC2::VPCEndpoint")]
    assert any(".sts" in s for s in services), services


def test_the_local_job_role_is_assumed_as_the_stacks_is(synth) -> None:
    import boto3
    from moto import mock_aws

    from devstack.tenant_role import create_job_role

    template = synth.raw["Resources"][logical_id(synth.stack.tenants.role)]["Properties"]
    (deployed,) = template["AssumeRolePolicyDocument"]["Statement"]
    with mock_aws():
        iam = boto3.client("iam", region_name="us-east-1")
        arn = create_job_role(iam)
        assert create_job_role(iam) == arn  # idempotent
        local = iam.get_role(RoleName=arn.rsplit("/", 1)[1])["Role"]
    (statement,) = local["AssumeRolePolicyDocument"]["Statement"]
    assert sorted(statement["Action"]) == sorted(deployed["Action"])
    assert statement["Condition"]["StringLike"] == deployed["Condition"]["StringLike"]
    assert local["MaxSessionDuration"] == template["MaxSessionDuration"]
