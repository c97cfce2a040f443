"""The quota checks of `make deploy-check` (scripts/quota_check.py, infra/quotas.py): each
stage's Fargate vCPU, Lambda concurrency and Elastic IP needs, read against a Service Quotas client
stubbed with botocore's Stubber (the real client's request and answer shapes, no network)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra.config import STAGES, StageConfig
from infra.quotas import (
    ELASTIC_IPS,
    FARGATE_ON_DEMAND_VCPU,
    LAMBDA_CONCURRENCY,
    Verdict,
    needs,
    quota_value,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import quota_check

pytestmark = pytest.mark.infra


def quota(code: tuple[str, str], value: float) -> dict[str, Any]:
    service, quota_code = code
    return {
        "Quota": {
            "ServiceCode": service,
            "QuotaCode": quota_code,
            "QuotaName": quota_code,
            "Value": value,
        }
    }


def stubbed(answers: list[tuple[str, tuple[str, str], Any]]) -> tuple[Any, Stubber]:
    client = boto3.client(
        "service-quotas",
        region_name="us-east-1",
        aws_access_key_id="stub",
        aws_secret_access_key="stub",
    )
    stub = Stubber(client)
    for method, code, value in answers:
        params = {"ServiceCode": code[0], "QuotaCode": code[1]}
        if value == "missing":
            stub.add_client_error(method, "NoSuchResourceException", expected_params=params)
        else:
            stub.add_response(method, quota(code, value), params)
    stub.activate()
    return client, stub


def test_prods_needs_count_every_pool_at_max_twice_and_every_lambda_consumer() -> None:
    prod = STAGES["prod"]
    fargate, lam, _ = (n for n in needs(prod) if "Spot" not in n.name)
    at_max = sum(p.max_tasks * p.cpu / 1024 for p in prod.pools if not p.spot)
    assert fargate.amount == 2 * at_max and (fargate.service_code, fargate.quota_code) == (
        FARGATE_ON_DEMAND_VCPU
    )
    reserved = sum(prod.reserved_concurrency.values())
    # 6 job DLQs at 2 each, webhooks at 10, the API at its throttle rate.
    assert lam.amount == max(reserved + 12 + 10 + int(prod.api_throttle_rate), reserved + 100)


def test_offline_the_check_prints_each_need_and_how_to_read_its_quota(capsys) -> None:
    assert quota_check.main(["dev"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    assert all(line.startswith("quota dev: ") and "not read" in line for line in lines)
    assert "--quota-code L-3032A538" in lines[0] and "--quota-code L-B99A9384" in lines[1]


def test_a_short_quota_fails_the_check_naming_need_and_value(capsys) -> None:
    prod = STAGES["prod"]
    fargate, _, addresses = needs(prod)
    client, stub = stubbed(
        [
            ("get_service_quota", FARGATE_ON_DEMAND_VCPU, fargate.amount - 1),
            # No applied value: AWS's default is read instead.
            ("get_service_quota", LAMBDA_CONCURRENCY, "missing"),
            ("get_aws_default_service_quota", LAMBDA_CONCURRENCY, 1000),
            ("get_service_quota", ELASTIC_IPS, addresses.amount),
        ]
    )
    assert quota_check.main(["--aws", "prod"], client_for=lambda region: client) == 1
    stub.assert_no_pending_responses()
    out = capsys.readouterr()
    fargate_line, lambda_line, address_line = out.out.splitlines()
    assert f"needs {fargate.amount:g}" in fargate_line
    assert fargate_line.endswith(f"account has {fargate.amount - 1:g}: SHORT")
    assert lambda_line.endswith("account has 1000: ok")
    assert address_line.endswith(f"account has {addresses.amount:g}: ok")
    assert "raise what is SHORT" in out.err


def test_enough_of_every_quota_passes() -> None:
    dev = STAGES["dev"]
    fargate, lam = needs(dev)
    client, _ = stubbed(
        [
            ("get_service_quota", FARGATE_ON_DEMAND_VCPU, fargate.amount),
            ("get_service_quota", LAMBDA_CONCURRENCY, lam.amount),
        ]
    )
    assert quota_check.main(["--aws", "dev"], client_for=lambda region: client) == 0


def _with_pools(stage: str, extra: list[dict[str, Any]]) -> StageConfig:
    data = STAGES[stage].model_dump()
    data["pools"] = [*data["pools"], *extra]
    return StageConfig.model_validate(data)


FIXED_IP_POOL = {
    "name": "partner",
    "cpu": 1024,
    "memory_mib": 2048,
    "concurrency": 2,
    "min_tasks": 0,
    "max_tasks": 2,
    "egress": "fixed_ip",
}


def test_each_nat_gateway_needs_an_elastic_ip_and_the_regions_default_of_5_can_be_short(
    capsys,
) -> None:
    # prod: two NAT gateways (one per AZ), and four fixed_ip pools' own: six addresses, one
    # more than a Region's default quota of five.
    pools = [{**FIXED_IP_POOL, "name": f"partner{n}"} for n in range(4)]
    config = _with_pools("prod", pools)
    addresses = next(n for n in needs(config) if n.name == "EC2-VPC Elastic IPs")
    assert addresses.amount == 2 + 4, addresses
    assert (addresses.service_code, addresses.quota_code) == ELASTIC_IPS
    assert "the VPC's 2, fixed_ip pools' 4" in addresses.why
    # No applied value: the Region's default is read, and six is short of it.
    client, stub = stubbed(
        [
            ("get_service_quota", ELASTIC_IPS, "missing"),
            ("get_aws_default_service_quota", ELASTIC_IPS, 5),
        ]
    )
    verdict = Verdict(addresses, quota_value(client, *ELASTIC_IPS))
    stub.assert_no_pending_responses()
    assert verdict.short and verdict.line("prod").endswith("account has 5: SHORT")


def test_a_stage_without_nat_gateways_needs_addresses_only_for_its_fixed_ip_pools() -> None:
    assert not [n for n in needs(STAGES["dev"]) if n.name == "EC2-VPC Elastic IPs"]
    config = _with_pools("dev", [FIXED_IP_POOL])
    (addresses,) = [n for n in needs(config) if n.name == "EC2-VPC Elastic IPs"]
    assert addresses.amount == 1
