"""What a stage needs of its account's quotas, and the check against Service Quotas.

A deploy whose tasks or functions do not fit the account's quotas succeeds and then fails
at run time: ECS leaves tasks unplaced, Lambda throttles. Each need is computed from the
stage's settings:

- **Fargate vCPU** (On-Demand and Spot apart: separate quotas): every pool at its
  ``max_tasks``, times two during a rolling deploy (the services' maximum healthy percent
  is 200: a full set of new tasks runs beside the old before those stop).
- **Lambda concurrency**: what is reserved, plus what runs from the unreserved pool at
  once (each SQS mapping at its maximum concurrency, and the API at its throttle rate for
  one-second invocations), and never under reserved + the 100 Lambda keeps unreserved.
- **Elastic IP addresses**: one for each NAT gateway of the stage's VPC (egress "nat") and
  one for each fixed_ip pool's own NAT gateway. The quota is the Region's, shared with
  every other stage and stack of the account there (5 by default: "Elastic IP address
  quota", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/elastic-ip-addresses-eip.html);
  a deploy short of it fails when CloudFormation allocates the address.

``check`` reads each quota with ``get_service_quota`` (the account's applied value) and
falls back to ``get_aws_default_service_quota`` where none was applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from infra.config import LAMBDA_UNRESERVED_MINIMUM, StageConfig
from infra.constructs.dead_letters import MAX_CONCURRENCY_PER_DLQ
from infra.constructs.notifications import WEBHOOK_MAX_CONCURRENCY
from pagefleet.specs.resources import queues_of

# Service Quotas codes (`aws service-quotas list-service-quotas --service-code ...`).
FARGATE_ON_DEMAND_VCPU = ("fargate", "L-3032A538")
FARGATE_SPOT_VCPU = ("fargate", "L-36FBB829")
LAMBDA_CONCURRENCY = ("lambda", "L-B99A9384")
ELASTIC_IPS = ("ec2", "L-0263D0A3")  # "EC2-VPC Elastic IPs"
# The workers' services run up to twice their desired count while a deploy replaces them.
ROLLING_DEPLOY_FACTOR = 2
# The API function's invocations are taken as one second each at the throttle rate.
API_INVOCATION_S = 1.0


@dataclass(frozen=True)
class Need:
    name: str
    service_code: str
    quota_code: str
    amount: float
    why: str


@dataclass(frozen=True)
class Verdict:
    need: Need
    quota: float | None  # None: not read (offline)

    @property
    def short(self) -> bool:
        return self.quota is not None and self.quota < self.need.amount

    def line(self, stage: str) -> str:
        n = self.need
        if self.quota is None:
            return (
                f"quota {stage}: {n.name} needs {n.amount:g} ({n.why}); not read: "
                f"aws service-quotas get-service-quota --service-code {n.service_code} "
                f"--quota-code {n.quota_code}"
            )
        verdict = "SHORT" if self.short else "ok"
        return (
            f"quota {stage}: {n.name} needs {n.amount:g} ({n.why}), account has "
            f"{self.quota:g}: {verdict}"
        )


def needs(config: StageConfig) -> list[Need]:
    out: list[Need] = []
    for spot, (service, code) in ((False, FARGATE_ON_DEMAND_VCPU), (True, FARGATE_SPOT_VCPU)):
        pools = {p.name: p for p in config.pools if p.spot is spot}
        if not pools:
            continue
        at_max = sum(p.max_tasks * p.cpu / 1024 for p in pools.values())
        parts = ", ".join(f"{n} {p.max_tasks} x {p.cpu / 1024:g}" for n, p in pools.items())
        out.append(
            Need(
                f"Fargate {'Spot' if spot else 'On-Demand'} vCPU",
                service,
                code,
                at_max * ROLLING_DEPLOY_FACTOR,
                f"{parts} vCPU at max_tasks = {at_max:g}, x{ROLLING_DEPLOY_FACTOR} during a "
                "rolling deploy",
            )
        )
    reserved = sum(config.reserved_concurrency.values())
    mappings = len(queues_of(config.pool_names)) * MAX_CONCURRENCY_PER_DLQ + WEBHOOK_MAX_CONCURRENCY
    api = math.ceil(config.api_throttle_rate * API_INVOCATION_S)
    running = reserved + mappings + api
    floor = reserved + LAMBDA_UNRESERVED_MINIMUM
    out.append(
        Need(
            "Lambda concurrent executions",
            *LAMBDA_CONCURRENCY,
            max(running, floor),
            f"reserved {reserved} + SQS mappings {mappings} + API {api} at "
            f"{config.api_throttle_rate:g} req/s = {running}; at least reserved + "
            f"{LAMBDA_UNRESERVED_MINIMUM} unreserved = {floor}",
        )
    )
    # One address per NAT gateway: the VPC's (CDK makes at most one per AZ's public subnet)
    # and each fixed_ip pool's own.
    vpc = min(config.nat_gateways, config.max_azs) if config.egress == "nat" else 0
    own = len(config.fixed_ip_pools)
    if vpc + own:
        out.append(
            Need(
                "EC2-VPC Elastic IPs",
                *ELASTIC_IPS,
                vpc + own,
                f"one per NAT gateway: the VPC's {vpc}, fixed_ip pools' {own}; the Region's "
                "quota is shared with the account's other stages and stacks there",
            )
        )
    return out


def quota_value(client: Any, service_code: str, quota_code: str) -> float:
    """The account's value of a quota: applied if any, else AWS's default."""
    try:
        answer = client.get_service_quota(ServiceCode=service_code, QuotaCode=quota_code)
    except client.exceptions.NoSuchResourceException:
        answer = client.get_aws_default_service_quota(
            ServiceCode=service_code, QuotaCode=quota_code
        )
    return float(answer["Quota"]["Value"])


def check(config: StageConfig, client: Any | None) -> list[Verdict]:
    """Each need against the account (``client``: a Service Quotas client in the stage's
    region), or unread when ``client`` is None."""
    return [
        Verdict(n, None if client is None else quota_value(client, n.service_code, n.quota_code))
        for n in needs(config)
    ]
