"""Least privilege, cdk-nag and cfn-lint on the synthesized template."""

from __future__ import annotations

import json

import pytest

from .helpers import as_list, logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

# Services whose actions we grant only on named resources.
DATA_SERVICES = ("dynamodb:", "sqs:", "s3:", "secretsmanager:", "kms:")


def _policies_of(synth, role_id: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [p for p in synth.props("AWS::IAM::Policy") if {"Ref": role_id} in p["Roles"]]


def test_no_wildcard_actions_anywhere(synth) -> None:
    for policy in synth.props("AWS::IAM::Policy"):
        for statement in policy["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                assert "*" not in action, (policy["PolicyName"], action)


# Actions AWS defines no resource for (a stream event source needs ListStreams on "*").
NO_RESOURCE_LEVEL = frozenset({"dynamodb:ListStreams"})


def test_data_actions_are_on_named_resources(synth) -> None:
    for policy in synth.props("AWS::IAM::Policy"):
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = [a for a in as_list(statement["Action"]) if a not in NO_RESOURCE_LEVEL]
            if any(a.startswith(DATA_SERVICES) for a in actions):
                assert "*" not in as_list(statement["Resource"]), statement


def test_one_role_per_function_and_per_task(synth) -> None:
    roles = set()
    for fn in synth.stack.functions.functions.values():
        roles.add(logical_id(fn.role))
    for pool in synth.stack.workers.pools.values():
        roles.add(logical_id(pool.task_definition.task_role))
    assert len(roles) == len(synth.stack.functions.functions) + len(synth.stack.workers.pools)


def test_each_worker_reaches_only_its_own_queue(synth) -> None:
    queues = synth.stack.queues.pools
    for name, pool in synth.stack.workers.pools.items():
        text = json.dumps(_policies_of(synth, logical_id(pool.task_definition.task_role)))
        for other, pool_queues in queues.items():
            for queue in pool_queues.by_priority:  # each priority's queue of the pool
                assert (logical_id(queue.queue) in text) == (other == name)
                assert logical_id(queue.dlq) not in text


def test_authorizer_only_reads_tenants(synth) -> None:
    role = logical_id(synth.stack.api.authorizer_function.role)
    actions = {
        a
        for p in _policies_of(synth, role)
        for s in p["PolicyDocument"]["Statement"]
        for a in as_list(s["Action"])
    }
    data = {a for a in actions if a.startswith(DATA_SERVICES)}
    assert data == {"dynamodb:GetItem", "dynamodb:Query"}
    text = json.dumps(_policies_of(synth, role))
    assert logical_id(synth.stack.store.jobs) not in text


def test_cdk_nag_has_no_unacknowledged_finding(stage_synth) -> None:
    # AwsSolutionsChecks is a policy-validation plugin: synth raises on any finding that is
    # not acknowledged; the fixture's synth of this stage succeeded. The report agrees.
    report = stage_synth.outdir / "validation-report.json"
    if report.exists():
        data = json.loads(report.read_text())
        violations = [v for r in data["pluginReports"] for v in r.get("violations", [])]
        assert not violations, [v["ruleName"] for v in violations]


def test_nag_acknowledgments_all_have_reasons() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "infra"
    calls = 0
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "acknowledge":
                calls += 1
                reason = node.args[2] if len(node.args) > 2 else None
                assert reason is not None, f"{path}:{node.lineno} acknowledgment without reason"
    assert calls > 0


def test_cfn_lint_is_clean(stage_synth) -> None:
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(
        stage_synth.template_path,
        config=ManualArgs(
            # W3005: CDK adds DependsOn next to GetAtt on purpose (ordering of policies).
            ignore_checks=["W3005"],
            regions=[stage_synth.stack.config.region or "us-east-1"],
        ),
    )
    assert not matches, "\n".join(str(m) for m in matches)
