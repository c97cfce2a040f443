"""Browser workers (Fargate per pool, scaling, protection) and monitoring."""

from __future__ import annotations

import json

import pytest

from infra.constructs.api import pricing_worker
from pagefleet.specs import metrics_names as m

from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def test_fargate_service_per_pool_sized_from_config(synth) -> None:
    config = synth.stack.config
    for name, pool in synth.stack.workers.pools.items():
        task = synth.raw["Resources"][logical_id(pool.task_definition)]["Properties"]
        assert task["Cpu"] == str(config.pool(name).cpu)
        assert task["Memory"] == str(config.pool(name).memory_mib)
        assert task["RequiresCompatibilities"] == ["FARGATE"]
        worker = next(c for c in task["ContainerDefinitions"] if c["Name"] == "Worker")
        assert worker["StopTimeout"] == config.worker_stop_timeout_seconds
        assert worker["ReadonlyRootFilesystem"] is True
        assert worker["LinuxParameters"]["InitProcessEnabled"] is True
        assert worker["LinuxParameters"]["Capabilities"] == {"Drop": ["ALL"]}
        assert worker["LogConfiguration"]["LogDriver"] == "awsfirelens"
        assert worker["LogConfiguration"]["Options"]["log_format"] == "json/emf"
        assert {m["ContainerPath"] for m in worker["MountPoints"]} == {"/tmp", "/home/pwuser"}
        env = {e["Name"]: e["Value"] for e in worker["Environment"]}
        assert env["PAGEFLEET_CONCURRENCY"] == str(config.pool(name).concurrency)
        waiting = str(config.pool(name).max_waiting_contexts)
        assert env["PAGEFLEET_MAX_WAITING_CONTEXTS"] == waiting
        assert env["PAGEFLEET_SPARE_CONTEXT"] == str(config.pool(name).spare_context).lower()
        # Steps are priced as usage is: on the stage's pricing shape, whatever the pool.
        assert json.loads(env["PAGEFLEET_PRICING_WORKER"]) == pricing_worker(config)
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == m.stage_namespace(config.stage)
        assert env["POWERTOOLS_SERVICE_NAME"] == m.WORKER_SERVICE
        service = synth.raw["Resources"][logical_id(pool.service)]["Properties"]
        assert service["TaskDefinition"] == {"Ref": logical_id(pool.task_definition)}


def test_image_is_the_browser_task_dockerfile(synth) -> None:
    assets = json.loads((synth.outdir / f"{synth.stack.artifact_id}.assets.json").read_text())
    images = list(assets["dockerImages"].values())
    assert len(images) == 1
    source = images[0]["source"]
    assert source["dockerFile"] == "browser_task/Dockerfile"
    staged = synth.outdir / source["directory"]
    top = {p.name for p in staged.iterdir()}
    assert {"pagefleet", "browser_task", "uv.lock", "pyproject.toml"} <= top
    assert not top & {".venv", "cdk.out", ".git", "tests"}


def test_scaling_on_queue_age_and_backlog(synth) -> None:
    config = synth.stack.config
    targets = synth.props("AWS::ApplicationAutoScaling::ScalableTarget")
    assert sorted((t["MinCapacity"], t["MaxCapacity"]) for t in targets) == sorted(
        (p.min_tasks, p.max_tasks) for p in config.pools
    )
    assert config.pool("standard").min_tasks >= 1  # warm minimum for the interactive pool
    policies = synth.props("AWS::ApplicationAutoScaling::ScalingPolicy")
    steps = [p for p in policies if p["PolicyType"] == "StepScaling"]
    tracking = [p for p in policies if p["PolicyType"] == "TargetTrackingScaling"]
    assert len(tracking) == len(config.pools)
    assert steps, "no step scaling"
    # Step scaling alarms on the oldest job of any of the pool's queues (metric math MAX).
    age_alarms = [
        a
        for a in synth.props("AWS::CloudWatch::Alarm")
        if any("ScalingPolicy" in json.dumps(x) or "Ref" in x for x in a.get("AlarmActions", []))
        and "Threshold" in a
        and a["Threshold"] in {p.age_steps[0].age_seconds for p in config.pools}
        and "MAX(" in json.dumps(a.get("Metrics", []))
    ]
    assert len(age_alarms) == len(config.pools)
    for alarm in age_alarms:
        ages = [m for m in alarm["Metrics"] if "MetricStat" in m]
        assert len(ages) == 3  # high, normal, low
        assert {m["MetricStat"]["Metric"]["MetricName"] for m in ages} == {
            "ApproximateAgeOfOldestMessage"
        }
    for policy in tracking:
        spec = policy["TargetTrackingScalingPolicyConfiguration"]
        queries = {q["Id"]: q for q in spec["CustomizedMetricSpecification"]["Metrics"]}
        assert queries["backlog"]["ReturnData"] is True
        assert "visible" in queries["backlog"]["Expression"]
        assert "running" in queries["backlog"]["Expression"]
        # Backlog counts every queue of the pool.
        assert queries["visible"]["Expression"].count("FILL(visible") == 3
        for i in range(3):
            assert (
                queries[f"visible{i}"]["MetricStat"]["Metric"]["MetricName"]
                == "ApproximateNumberOfMessagesVisible"
            )


def test_worker_role_can_protect_its_task(synth) -> None:
    for pool in synth.stack.workers.pools.values():
        role = logical_id(pool.task_definition.task_role)
        actions = set()
        for policy in synth.props("AWS::IAM::Policy"):
            if {"Ref": role} in policy["Roles"]:
                for statement in policy["PolicyDocument"]["Statement"]:
                    a = statement["Action"]
                    actions |= set(a if isinstance(a, list) else [a])
        assert {"ecs:UpdateTaskProtection", "ecs:GetTaskProtection"} <= actions


def test_network_avoids_nat_for_aws_traffic(synth) -> None:
    endpoints = synth.props("AWS::EC2::VPCEndpoint")
    gateways = [
        json.dumps(e["ServiceName"])
        for e in endpoints
        if e.get("VpcEndpointType") in (None, "Gateway")
    ]
    assert any(".s3" in g for g in gateways) and any(".dynamodb" in g for g in gateways)
    assert synth.stack.config.egress == "public"
    assert not synth.resources("AWS::EC2::NatGateway")
    for service in synth.props("AWS::ECS::Service"):
        vpc = service["NetworkConfiguration"]["AwsvpcConfiguration"]
        assert vpc["AssignPublicIp"] == "ENABLED"
    # The task security group accepts nothing inbound.
    sg = synth.raw["Resources"][logical_id(synth.stack.workers.security_group)]["Properties"]
    assert "SecurityGroupIngress" not in sg


def test_dashboard_shows_the_watched_figures(synth) -> None:
    body = json.dumps(synth.props("AWS::CloudWatch::Dashboard")[0]["DashboardBody"])
    for name in (
        m.JOB_DURATION,
        m.QUEUE_DELAY,
        m.JOBS_FINISHED,
        m.RETRIES,
        m.TIMEOUTS,
        m.BROWSER_CRASHES,
        m.SLOTS_BUSY,
        "ApproximateAgeOfOldestMessage",
        "ApproximateNumberOfMessagesVisible",
        "RunningTaskCount",
        "4XXError",
        "5XXError",
        "Latency",
    ):
        assert name in body, name
    for stat in ("p50", "p95", "p99"):
        assert stat in body


def test_failure_rate_and_api_alarms_notify_the_topic(synth) -> None:
    topic = {"Ref": logical_id(synth.stack.alerts.topic)}
    alarms = synth.props("AWS::CloudWatch::Alarm")
    failure = [a for a in alarms if "Metrics" in a and m.JOBS_FINISHED in json.dumps(a["Metrics"])]
    assert len(failure) == len(synth.stack.config.pools)
    api_5xx = [a for a in alarms if a.get("MetricName") == "5XXError"]
    assert len(api_5xx) == 1
    for alarm in [*failure, *api_5xx]:
        assert alarm["AlarmActions"] == [topic]
    topic_props = synth.raw["Resources"][logical_id(synth.stack.alerts.topic)]["Properties"]
    assert "KmsMasterKeyId" in topic_props
