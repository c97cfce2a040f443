"""Browser sessions below the code: no role reaches a per-session queue (there are none);
the workers' inboxes are reached by each runtime for exactly what it does with them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pagefleet.specs.resources import inbox_queue_prefix

from .helpers import as_list, logical_id, statements

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def _granted(synth: Any, grantee: Any) -> list[dict[str, Any]]:
    ref = {"Ref": logical_id(grantee)}
    return [s for p in synth.props("AWS::IAM::Policy") if ref in p["Roles"] for s in statements(p)]


def _sqs_on(granted: list[dict[str, Any]], marker: str) -> set[str]:
    return {
        action
        for s in granted
        if marker in json.dumps(s["Resource"])
        for action in as_list(s["Action"])
        if action.startswith("sqs:")
    }


def test_no_role_reaches_a_session_queue_and_each_reaches_inboxes_for_its_part(
    stage_synth: Any,
) -> None:
    stack = stage_synth.stack
    policies = json.dumps(stage_synth.props("AWS::IAM::Policy"))
    assert f"pagefleet-{stack.config.stage}-session-" not in policies
    inboxes = inbox_queue_prefix(stack.config.stage) + "*"

    api = _granted(stage_synth, stack.api.handler.role)
    assert _sqs_on(api, inboxes) == {"sqs:SendMessage"}  # wakes a worker: nothing else
    for pool in stack.workers.pools.values():
        worker = _granted(stage_synth, pool.task_definition.task_role)
        assert _sqs_on(worker, inboxes) == {
            "sqs:CreateQueue",
            "sqs:GetQueueAttributes",
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:DeleteQueue",
        }
    sweeper = _granted(stage_synth, stack.sweeper.function.role)
    assert _sqs_on(sweeper, inboxes) == {"sqs:GetQueueAttributes", "sqs:DeleteQueue"}
    listing = [s for s in sweeper if "sqs:ListQueues" in as_list(s["Action"])]
    assert len(listing) == 1 and as_list(listing[0]["Action"]) == ["sqs:ListQueues"]
    # No role but the workers' may make a queue at run time.
    makers = {
        p["Roles"][0]["Ref"]
        for p in stage_synth.props("AWS::IAM::Policy")
        for s in statements(p)
        if "sqs:CreateQueue" in as_list(s["Action"])
    }
    workers = {logical_id(p.task_definition.task_role) for p in stack.workers.pools.values()}
    assert makers <= workers


def test_session_commands_are_the_tagged_tenants_alone(stage_synth: Any) -> None:
    """Issue 32 finding 9: a session's commands (steps, extracted data, page snapshots)
    were reachable by the task and API roles for every tenant. The job role reaches only
    its tag's partition; every worker task role is denied the partitions outright."""
    stack = stage_synth.stack
    jobs = logical_id(stack.store.jobs)
    tagged = "SCMD#${aws:PrincipalTag/tenant}"
    job_role = _granted(stage_synth, stack.tenants.role)
    [ledger] = [s for s in job_role if s.get("Sid") == "TenantSessionCommands"]
    assert ledger["Effect"] == "Allow" and jobs in json.dumps(ledger["Resource"])
    assert ledger["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [tagged]}}
    for pool in stack.workers.pools.values():
        task = _granted(stage_synth, pool.task_definition.task_role)
        [deny] = [s for s in task if s.get("Sid") == "NoSessionCommands"]
        assert deny["Effect"] == "Deny"
        assert {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"} <= set(
            as_list(deny["Action"])
        )
        assert deny["Condition"] == {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["SCMD#*"]}}


def test_workers_may_add_audit_records_and_nothing_else_of_the_tenants_table(
    stage_synth: Any,
) -> None:
    """A takeover returned after its idle time is audited by the worker that returned it
    (browser_task.run.takeover): PutItem, in the AUDIT# partitions only."""
    stack = stage_synth.stack
    tenants = logical_id(stack.store.tenants)
    for pool in stack.workers.pools.values():
        task = _granted(stage_synth, pool.task_definition.task_role)
        [audit] = [s for s in task if s.get("Sid") == "AuditTakeoverReturns"]
        assert audit["Effect"] == "Allow" and as_list(audit["Action"]) == ["dynamodb:PutItem"]
        assert tenants in json.dumps(audit["Resource"])
        assert audit["Condition"] == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["AUDIT#*"]}
        }
        puts = [s for s in task if "dynamodb:PutItem" in as_list(s["Action"])]
        assert all(s is audit or tenants not in json.dumps(s["Resource"]) for s in puts), (
            "another PutItem on the tenants table"
        )
