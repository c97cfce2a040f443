"""What makes `cdk deploy` work and keep working: in every stage, and on a new account."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from .conftest import DEPLOY_DOC, documented_deploy_contexts
from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_stage_synthesizes(stage_synth) -> None:
    # Synth raised on any cdk-nag finding; here: the stack is the stage asked for.
    assert stage_synth.stack.stack_name == f"pagefleet-{stage_synth.stage}"
    assert stage_synth.resources("AWS::ECS::Service")


def test_interface_endpoints_open_to_the_workers_only(stage_synth) -> None:
    endpoints = [
        e for e in stage_synth.props("AWS::EC2::VPCEndpoint") if e["VpcEndpointType"] == "Interface"
    ]
    if stage_synth.stack.config.egress == "public":
        assert not endpoints
        return
    assert len(endpoints) == 6  # SQS, ECR (API, Docker), Logs, Secrets Manager, STS
    workers = stage_synth.stack.workers
    endpoint_sg = logical_id(workers.endpoint_security_group)
    for endpoint in endpoints:
        assert endpoint["SecurityGroupIds"] == [{"Fn::GetAtt": [endpoint_sg, "GroupId"]}]
    sg = stage_synth.raw["Resources"][endpoint_sg]["Properties"]
    ingress = [
        i["Properties"]
        for i in stage_synth.resources("AWS::EC2::SecurityGroupIngress").values()
        if i["Properties"]["GroupId"] == {"Fn::GetAtt": [endpoint_sg, "GroupId"]}
    ] + sg.get("SecurityGroupIngress", [])
    assert ingress == [
        {
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
            "Description": "HTTPS from the browser workers",
            "GroupId": {"Fn::GetAtt": [endpoint_sg, "GroupId"]},
            "SourceSecurityGroupId": {
                "Fn::GetAtt": [logical_id(workers.security_group), "GroupId"]
            },
        }
    ]


def test_autoscaled_services_have_no_desired_count(stage_synth) -> None:
    # A DesiredCount in the template resets the service to it on every deploy.
    scaled = {
        json.dumps(t["ResourceId"])
        for t in stage_synth.props("AWS::ApplicationAutoScaling::ScalableTarget")
    }
    services = stage_synth.resources("AWS::ECS::Service")
    assert len(scaled) == len(services)
    for service in services.values():
        assert "DesiredCount" not in service["Properties"]


def test_reserved_concurrency_only_where_configured_and_affordable(stage_synth) -> None:
    from infra.config import LAMBDA_UNRESERVED_MINIMUM

    config = stage_synth.stack.config
    reserved = {
        name: stage_synth.raw["Resources"][logical_id(fn)]["Properties"].get(
            "ReservedConcurrentExecutions"
        )
        for name, fn in stage_synth.stack.functions.functions.items()
    }
    assert {n: r for n, r in reserved.items() if r is not None} == config.reserved_concurrency
    assert sum(config.reserved_concurrency.values()) <= max(
        0, config.min_account_concurrency - LAMBDA_UNRESERVED_MINIMUM
    )


def test_a_stage_cannot_reserve_what_its_account_cannot_give() -> None:
    from infra.config import STAGES, StageConfig

    prod = STAGES["prod"].model_dump()
    with pytest.raises(ValidationError, match="can reserve at most 0"):
        StageConfig.model_validate({**prod, "min_account_concurrency": 10})
    # New accounts deploy prod by reserving nothing (the override docs/deploy.md gives).
    StageConfig.model_validate({**prod, "min_account_concurrency": 10, "reserved_concurrency": {}})
    assert not STAGES["dev"].reserved_concurrency  # dev deploys on any new account


def test_a_reservation_for_a_missing_function_fails_synth(tmp_path) -> None:
    from aws_cdk import App, Stack, aws_logs

    from infra.constructs.lambda_factory import LambdaFactory

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "s")
    LambdaFactory(
        stack,
        "F",
        stage="dev",
        log_retention=aws_logs.RetentionDays.ONE_DAY,
        bundle_dependencies=False,
        reserved_concurrency={"sweepr": 1},
        inspect_only=True,
    )
    with pytest.raises(Exception, match="unknown functions"):
        app.synth()


def _consumers(synth) -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    """(queue logical id, visibility needed by its consumer, who) for every consumer."""
    resources = synth.raw["Resources"]
    out = []
    for mapping in synth.props("AWS::Lambda::EventSourceMapping"):
        source = mapping["EventSourceArn"].get("Fn::GetAtt", [None])[0]
        if source not in resources or resources[source]["Type"] != "AWS::SQS::Queue":
            continue
        function = resources[mapping["FunctionName"]["Ref"]]["Properties"]
        window = mapping.get("MaximumBatchingWindowInSeconds", 0)
        # AWS: six times the function timeout plus the batching window.
        out.append((source, 6 * function["Timeout"] + window, mapping["FunctionName"]["Ref"]))
    from pagefleet.specs.settings import WorkerSettings

    heartbeat = WorkerSettings.model_fields["heartbeat_seconds"].default
    for pool in synth.stack.workers.pools.values():
        # The worker extends the lease every heartbeat: a lease survives two missed ones.
        for worker_queue in pool.queue.queues:
            out.append((logical_id(worker_queue), 3 * heartbeat, f"worker {pool.name}"))
    return out


def test_every_queue_outlasts_its_consumer_with_margin(stage_synth) -> None:
    consumers = _consumers(stage_synth)
    queues = stage_synth.resources("AWS::SQS::Queue")
    # A queue no function consumes is an operator's dead-letter queue (alarmed, read by hand).
    from infra.constructs.alarms import dead_letter_queues

    for_operators = {
        logical_id(q)
        for q in dead_letter_queues(stage_synth.stack, stage_synth.stack.alerts).values()
    }
    unconsumed = set(queues) - {q for q, _, _ in consumers}
    assert unconsumed <= for_operators, f"queues without a known consumer: {unconsumed}"
    for queue, needed, who in consumers:
        visibility = queues[queue]["Properties"].get("VisibilityTimeout", 30)
        assert visibility >= needed, f"{queue}: visibility {visibility} s < {needed} s ({who})"


def test_prod_like_stages_back_up_their_tables(stage_synth) -> None:
    config = stage_synth.stack.config
    plans = stage_synth.props("AWS::Backup::BackupPlan")
    if config.backup_retention_days is None:
        assert not plans
        return
    assert config.stage != "dev"
    (plan,) = plans
    (rule,) = plan["BackupPlan"]["BackupPlanRule"]
    assert rule["Lifecycle"] == {"DeleteAfterDays": config.backup_retention_days}
    assert rule["ScheduleExpression"] == "cron(0 3 * * ? *)"  # daily
    (selection,) = stage_synth.props("AWS::Backup::BackupSelection")
    text = json.dumps(selection["BackupSelection"]["Resources"])
    store = stage_synth.stack.store
    for table in (store.jobs, store.tenants, store.usage):
        assert logical_id(table) in text
    vault = stage_synth.resources("AWS::Backup::BackupVault")
    assert [v["DeletionPolicy"] for v in vault.values()] == ["Retain"]


def test_prod_backs_up_for_35_days() -> None:
    from infra.config import STAGES

    assert STAGES["prod"].backup_retention_days == 35
    assert STAGES["dev"].backup_retention_days is None


def _layer_key(outdir: Path, *, bundled: bool) -> str:
    """The layer's S3 key in a small stack; bundling itself is skipped (no install), as
    `cdk deploy --exclusively` does for stacks it does not deploy."""
    from aws_cdk import App, Stack, aws_logs
    from aws_cdk.assertions import Template

    from infra.constructs.lambda_factory import LambdaFactory

    app = App(outdir=str(outdir), context={"aws:cdk:bundling-stacks": []})
    stack = Stack(app, "layer")
    LambdaFactory(
        stack,
        "F",
        stage="dev",
        log_retention=aws_logs.RetentionDays.ONE_DAY,
        bundle_dependencies=bundled,
        reserved_concurrency={},
        inspect_only=True,
    )
    (layer,) = Template.from_stack(stack).find_resources("AWS::Lambda::LayerVersion").values()
    return str(layer["Properties"]["Content"]["S3Key"])


def test_layer_hash_covers_the_lock_and_the_bundling_mode(tmp_path) -> None:
    from infra.constructs.lambda_factory import LAYER_INPUTS, layer_asset_hash

    offline = layer_asset_hash(bundled=False)
    assert offline != layer_asset_hash(bundled=True)
    for name in LAYER_INPUTS:
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    assert layer_asset_hash(bundled=False, root=tmp_path) == offline
    with (tmp_path / "uv.lock").open("a") as lock:
        lock.write("\n# changed\n")
    assert layer_asset_hash(bundled=False, root=tmp_path) != offline
    # What gets published: an offline assembly's marker-only layer never shares the key
    # of the real layer, and the same inputs give the same key.
    real = _layer_key(tmp_path / "a", bundled=True)
    assert _layer_key(tmp_path / "b", bundled=False) != real
    assert _layer_key(tmp_path / "c", bundled=True) == real


def test_deploy_doc_matches_what_is_tested() -> None:
    text = DEPLOY_DOC.read_text()
    assert "Node.js 22 or 24" in text
    assert "`uv` on `PATH`" in text
    contexts = documented_deploy_contexts()
    # The stages the doc deploys are the stages the tests synthesize, with the same context.
    from infra.config import STAGES

    assert set(contexts) <= set(STAGES)
    assert "prod" in contexts and contexts["prod"]["pagefleet:stage"] == "prod"
    # A deployment's settings live in the deploy file, not in a command's overrides (a later
    # command without them would drop them); the doc shows how to make it.
    assert all("pagefleet:overrides" not in c for c in contexts.values())
    assert "cp pagefleet.deploy.example.json pagefleet.deploy.json" in text


def test_stack_has_no_wildcard_deletion_of_data(stage_synth) -> None:
    config = stage_synth.stack.config
    for cfn_type in ("AWS::DynamoDB::Table", "AWS::S3::Bucket"):
        for resource in stage_synth.resources(cfn_type).values():
            policy = resource.get("DeletionPolicy")
            assert policy == ("Retain" if config.retain_data else "Delete"), cfn_type


def test_region_bound_stage_is_bound(stage_synth) -> None:
    region = stage_synth.stack.config.region
    text = json.dumps(stage_synth.raw)
    if region:
        assert f"arn:aws:secretsmanager:{region}:" in text
    else:
        assert "AWS::Region" in text
