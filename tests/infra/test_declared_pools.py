"""A pool declared in the deploy file, with no code change: its own queues, service, scaling,
alarms, settings and offer, per-pool egress and isolation; the stage's own pools untouched.

One synth of prod with three more pools: "pdf" (one job per task, a fresh browser per job,
egress through a proxy from Secrets Manager), "edge" (a public IP per task on a NAT stage)
and "partner" (its own NAT gateway and Elastic IP: one fixed address).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pagefleet.specs.resources import queues_of
from pagefleet.specs.settings import WorkerSettings, env_name

from .conftest import EXAMPLE_DEPLOY_FILE, REPO_ROOT, Synth, Synths, synthesize
from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

SECRET = "pagefleet/pdf-proxy"
POOLS = [
    {"name": "heavy", "max_tasks": 5},  # merged into the stage's heavy by name
    {
        "name": "pdf",
        "cpu": 1024,
        "memory_mib": 3072,
        "concurrency": 1,
        "min_tasks": 0,
        "max_tasks": 3,
        "isolation": "task",
        "egress": "proxy",
        "proxy_secret": SECRET,
    },
    {
        "name": "edge",
        "cpu": 1024,
        "memory_mib": 2048,
        "concurrency": 2,
        "min_tasks": 0,
        "max_tasks": 2,
        "egress": "public",
    },
    {
        "name": "partner",
        "cpu": 1024,
        "memory_mib": 2048,
        "concurrency": 2,
        "min_tasks": 0,
        "max_tasks": 2,
        "egress": "fixed_ip",
    },
]


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    out = tmp_path_factory.mktemp("cdk.out-declared")
    deploy = json.loads((REPO_ROOT / EXAMPLE_DEPLOY_FILE).read_text())
    deploy["prod"]["pools"] = POOLS
    deploy_file = out / "pagefleet.deploy.json"
    deploy_file.write_text(json.dumps(deploy))
    return synthesize("prod", out / "assembly", {"pagefleet:deployFile": str(deploy_file)})


def _worker(synth: Synth, pool: str) -> dict[str, Any]:
    task = synth.stack.workers.pools[pool].task_definition
    props = synth.raw["Resources"][logical_id(task)]["Properties"]
    return next(c for c in props["ContainerDefinitions"] if c["Name"] == "Worker")


def _service(synth: Synth, pool: str) -> dict[str, Any]:
    service = synth.stack.workers.pools[pool].service
    return dict(synth.raw["Resources"][logical_id(service)]["Properties"])


def test_the_stages_own_queues_and_services_keep_their_ids_and_properties(
    declared: Synth, synths: Synths
) -> None:
    """Declaring pools replaces nothing of the stage's: same logical ids, same properties."""
    before = synths.get("prod")
    for cfn_type in ("AWS::SQS::Queue", "AWS::ECS::Service", "AWS::EC2::Subnet"):
        old, new = before.resources(cfn_type), declared.resources(cfn_type)
        assert set(old) < set(new)
        if cfn_type != "AWS::ECS::Service":
            for resource_id, resource in old.items():
                assert new[resource_id] == resource, resource_id
    ids = set(declared.resources("AWS::SQS::Queue"))
    for name in ("PdfJobs", "PdfHighJobs", "PdfLowJobs", "PdfDeadLetters", "EdgeJobs"):
        assert any(i.startswith(f"JobQueues{name}") for i in ids), name


def test_a_declared_pool_has_its_queues_scaling_and_alarms(declared: Synth) -> None:
    keys = {q.key for q in declared.stack.queues.all}
    assert {s.key for s in queues_of(("pdf", "edge"))} <= keys
    pdf = declared.stack.workers.pools["pdf"]
    targets = declared.props("AWS::ApplicationAutoScaling::ScalableTarget")
    (target,) = [t for t in targets if _names(t, pdf)]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 3)
    heavy_target = next(t for t in targets if _names(t, declared.stack.workers.pools["heavy"]))
    assert heavy_target["MaxCapacity"] == 5  # merged by name over the stage's heavy
    alarms = json.dumps(declared.props("AWS::CloudWatch::Alarm"))
    for spec in queues_of(("pdf",)):
        queue = next(q for q in declared.stack.queues.all if q.key == spec.key)
        assert logical_id(queue.queue) in alarms  # its oldest-age alarm
        assert logical_id(queue.dlq) in alarms  # its dead letters' alarm
    # The pool's own task alarms (alarms.py: per pool service).
    assert logical_id(pdf.service) in alarms or '"pdf"' in alarms


def _names(target: dict[str, Any], pool: Any) -> bool:
    return logical_id(pool.service) in json.dumps(target["ResourceId"])


def test_a_declared_pools_worker_runs_its_settings_isolation_and_proxy(declared: Synth) -> None:
    worker = _worker(declared, "pdf")
    env = {e["Name"]: e["Value"] for e in worker["Environment"]}
    assert env[env_name(WorkerSettings, "pool")] == "pdf"
    assert env[env_name(WorkerSettings, "concurrency")] == "1"
    assert env[env_name(WorkerSettings, "isolation")] == "task"
    # The proxy comes from the secret when the task starts, never into the template.
    (secret,) = worker["Secrets"]
    assert secret["Name"] == env_name(WorkerSettings, "egress_proxy")
    assert SECRET in json.dumps(secret["ValueFrom"])
    assert "Secrets" not in _worker(declared, "standard")
    task = declared.stack.workers.pools["pdf"].task_definition
    execution = declared.raw["Resources"][logical_id(task.obtain_execution_role())]
    policies = [
        p["Properties"]
        for p in declared.resources("AWS::IAM::Policy").values()
        if {"Ref": logical_id(task.obtain_execution_role())} in p["Properties"]["Roles"]
    ]
    assert execution and "secretsmanager:GetSecretValue" in json.dumps(policies)


def test_pools_run_where_their_egress_says(declared: Synth) -> None:
    network = {
        pool: _service(declared, pool)["NetworkConfiguration"]["AwsvpcConfiguration"]
        for pool in ("standard", "pdf", "edge")
    }
    assert network["standard"]["AssignPublicIp"] == "DISABLED"  # the stage's NAT
    assert network["pdf"]["AssignPublicIp"] == "DISABLED"  # the proxy, from the NAT subnets
    assert network["edge"]["AssignPublicIp"] == "ENABLED"
    assert network["edge"]["Subnets"] != network["standard"]["Subnets"]


def test_a_fixed_ip_pool_reaches_sites_from_its_own_elastic_ip(declared: Synth) -> None:
    """Its own subnets (in the VPC's second CIDR block), whose default route is its own NAT
    gateway with its own Elastic IP, given as a stack output for sites to allow-list."""
    raw = declared.raw["Resources"]
    (address_id,) = [k for k, v in raw.items() if v["Type"] == "AWS::EC2::EIP" and "Partner" in k]
    (nat_id,) = [
        k
        for k, v in raw.items()
        if v["Type"] == "AWS::EC2::NatGateway"
        and v["Properties"]["AllocationId"] == {"Fn::GetAtt": [address_id, "AllocationId"]}
    ]
    routes = [
        v["Properties"]
        for v in raw.values()
        if v["Type"] == "AWS::EC2::Route" and v["Properties"].get("NatGatewayId") == {"Ref": nat_id}
    ]
    tables = {json.dumps(r["RouteTableId"]) for r in routes}
    assert len(routes) == 2 and all(r["DestinationCidrBlock"] == "0.0.0.0/0" for r in routes)
    network = _service(declared, "partner")["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    subnets = [raw[s["Ref"]]["Properties"] for s in network["Subnets"]]
    assert sorted(s["CidrBlock"] for s in subnets) == ["10.1.0.0/24", "10.1.1.0/24"]
    associations = [
        v["Properties"]
        for v in raw.values()
        if v["Type"] == "AWS::EC2::SubnetRouteTableAssociation"
    ]
    mine = {
        json.dumps(a["RouteTableId"]) for a in associations if a["SubnetId"] in network["Subnets"]
    }
    assert mine == tables
    outputs = declared.raw["Outputs"]
    assert outputs["PoolEgressIpPartner"]["Value"] == {"Ref": address_id}
    offers = json.loads(
        raw[logical_id(declared.stack.api.handler)]["Properties"]["Environment"]["Variables"][
            "PAGEFLEET_POOLS"
        ]
    )
    assert next(o for o in offers if o["name"] == "partner")["egress"] == "fixed_ip"


def test_the_api_offers_and_queues_every_declared_pool(declared: Synth) -> None:
    api = declared.raw["Resources"][logical_id(declared.stack.api.handler)]
    env = api["Properties"]["Environment"]["Variables"]
    offers = {o["name"]: o for o in json.loads(env["PAGEFLEET_POOLS"])}
    assert set(offers) == {"standard", "heavy", "pdf", "edge", "partner"}
    assert (offers["pdf"]["egress"], offers["pdf"]["isolation"]) == ("proxy", "task")
    assert offers["edge"]["egress"] == "public" and offers["standard"]["egress"] == "nat"
    assert '\\"pdf-high\\"' in json.dumps(env["PAGEFLEET_QUEUE_URLS"])


def test_egress_and_isolation_a_stage_cannot_give_are_refused_at_synth(tmp_path: Path) -> None:
    from infra.config import STAGES, StageConfig
    from infra.pool_config import PoolConfig

    dev = STAGES["dev"].model_dump()
    with pytest.raises(ValueError, match='ask for egress "nat", which needs the stage egress'):
        StageConfig.model_validate(
            {**dev, "pools": [*dev["pools"], {**dev["pools"][0], "name": "nat1", "egress": "nat"}]}
        )
    with pytest.raises(ValueError, match="isolation task runs one job per task"):
        PoolConfig(
            name="iso",
            cpu=1024,
            memory_mib=2048,
            concurrency=2,
            min_tasks=0,
            max_tasks=1,
            isolation="task",
        )
    with pytest.raises(ValueError, match='egress "proxy" and proxy_secret go together'):
        PoolConfig(
            name="px",
            cpu=1024,
            memory_mib=2048,
            concurrency=1,
            min_tasks=0,
            max_tasks=1,
            egress="proxy",
        )
    with pytest.raises(ValueError, match=r"tenant_defaults.pools names pools the stage lacks"):
        StageConfig.model_validate({**dev, "tenant_defaults": {"pools": ["gpu"]}})
    with pytest.raises(ValueError, match="names of their own"):
        StageConfig.model_validate({**dev, "pools": [*dev["pools"], dev["pools"][0]]})


def test_declared_pools_leave_the_stack_within_cloudformations_quotas(declared: Synth) -> None:
    """Each pool adds ~27 resources; the synth refuses a stack over 500 (infra/deploy_quotas)."""
    from infra.deploy_quotas import SECTION_MAX, template_excess

    body = declared.template_path.read_bytes()
    assert template_excess(declared.raw, len(body)) == []
    # Five pools: 444 resources; a sixth leaves ~30 before CloudFormation's 500.
    assert len(declared.raw["Resources"]) < SECTION_MAX["Resources"] - 50
