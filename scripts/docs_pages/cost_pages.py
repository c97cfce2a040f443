"""docs/deploy.md's two cost tables, priced from the recorded usage and the stages' settings.

Per 1,000 jobs: the usage ``bench/cost.py`` recorded (bench/recorded/cost_usage.json: jobs,
attempts, browser-seconds, artifacts, as the platform counted them) priced with the API's
own code (``pagefleet.tenancy.usage.priced``) on each stage's standard task, today's
architecture and slots (``infra.constructs.api.pricing_worker``). Standing still: what each
stage runs before any job (``infra/config.py``) at the price table's standing prices. A
change of slots, architecture, task size or prices therefore changes the guide, and
tests/unit/test_docs_reference.py fails until ``make docs`` writes it again.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from docs_pages.table import table

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDED = REPO_ROOT / "bench" / "recorded" / "cost_usage.json"
HOURS_PER_MONTH = 730
# infra/constructs/worker_network.py's interface endpoints (SQS, ECR API, ECR Docker, Logs,
# Secrets Manager, STS), each in every AZ, and api_firewall.py's four rules.
INTERFACE_ENDPOINTS = 6
WAF_RULES = 4
# Alarms a stage makes (each function's two, per pool and queue, tables, DLQs): about 50.
ALARMS = 50


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data


def _usage_row() -> Any:
    from pagefleet.tenancy.usage import UsageRow

    return UsageRow(tenant_id="cost-bench", day="", **recorded()["usage"])


def _worker(stage: str) -> Any:
    from pydantic import TypeAdapter

    from infra.config import STAGES
    from infra.constructs.api import pricing_worker
    from pagefleet.pricing import Worker

    return TypeAdapter(Worker).validate_python(pricing_worker(STAGES[stage]))


def _retention(stage: str) -> int:
    from infra.config import STAGES

    return STAGES[stage].tenant_defaults.retention_days


def per_job() -> str:
    """The per-1,000-jobs table: each stage's standard task, on demand, and x86_64 Spot."""
    from bench.cost import per_thousand
    from infra.config import STAGES
    from pagefleet.pricing import REGIONS, price_table
    from pagefleet.tenancy.usage import as_priced, priced

    source = recorded()
    row = _usage_row()
    scaled = per_thousand(row)
    counted = as_priced(scaled)
    rows = []
    for stage in STAGES:
        worker = _worker(stage)
        costs = priced(scaled, worker, _retention(stage))
        spot = priced(
            scaled, dataclasses.replace(worker, spot=True, architecture="x86_64"), _retention(stage)
        )
        task = (
            f"{worker.vcpu:g} vCPU, {worker.memory_gb:g} GB, {worker.slots} slots, "
            f"{worker.architecture}"
        )
        rows.append(
            (
                f"`{stage}`",
                task,
                *(f"${costs[r]['total_usd']:.3f}" for r in REGIONS),
                f"${costs['us-east-1']['by_service_usd']['fargate']:.3f}",
                f"${spot['us-east-1']['total_usd']:.3f}",
            )
        )
    prod = _worker("prod")
    prod_costs = priced(scaled, prod, _retention("prod"))["us-east-1"]
    total = prod_costs["total_usd"]
    verdict = "meets" if total <= 0.05 else "misses"
    shares = ", ".join(
        f"{name.replace('_', ' ')} {usd / total:.0%}"
        for name, usd in prod_costs["by_service_usd"].items()
        if usd / total >= 0.01
    )
    lines = [
        (
            f"Recorded by the platform ({source['recorded']}, commit {source['commit']}, load "
            f"{source['load']}, `{source['command']}`): {row.jobs} jobs, {row.attempts} attempts, "
            f"{row.browser_seconds:g} browser-seconds ({row.browser_seconds / row.jobs:.2f} s a "
            f"job), {row.artifact_puts} artifact uploads. Per 1,000 jobs, as priced: "
            f"{counted.browser_seconds:,.0f} slot-seconds, {counted.api_requests:,} API requests, "
            f"{counted.lambda_invocations:,} Lambda invocations, {counted.queue_requests:,} SQS "
            f"requests, {counted.table_writes:,} DynamoDB write units and "
            f"{counted.table_reads:,} read units, {counted.artifact_puts:,} S3 puts. Prices as of "
            f"{price_table()['as_of']}."
        ),
        "",
        table(
            (
                "stage",
                "standard task",
                *(f"{r}, on demand" for r in REGIONS),
                "of it Fargate (us-east-1)",
                "us-east-1, Fargate Spot on x86_64",
            ),
            rows,
        ).rstrip("\n"),
        "",
        (
            f"prod in us-east-1 on demand: **${total:.3f} per 1,000 jobs, {verdict} the $0.05 "
            f"target** ({shares})."
        ),
    ]
    return "\n".join(lines) + "\n"


def _task_hour(cpu: int, memory_mib: int, architecture: str, spot: bool) -> float:
    from pagefleet.pricing import price_table

    prices = price_table()["regions"]["us-east-1"]
    hour = (
        cpu / 1024 * prices["fargate_vcpu_hour"][architecture]
        + memory_mib / 1024 * prices["fargate_gb_hour"][architecture]
    )
    return float(hour * (1 - prices["fargate_spot_discount"]) if spot else hour)


def _standing(stage: str) -> dict[str, tuple[str, float]]:
    from infra.config import STAGES
    from pagefleet.pricing import price_table

    config = STAGES[stage]
    p = price_table()["standing"]
    month = HOURS_PER_MONTH
    pools = [(pool.name, pool) for pool in config.pools if pool.min_tasks]
    tasks = sum(pool.min_tasks for _, pool in pools)
    workers = sum(
        pool.min_tasks
        * _task_hour(pool.cpu, pool.memory_mib, config.architecture_of(name), pool.spot)
        * month
        for name, pool in pools
    )
    shapes = " + ".join(
        f"{pool.min_tasks} x ({pool.cpu / 1024:g} vCPU, {pool.memory_mib / 1024:g} GB, "
        f"{config.architecture_of(name)})"
        for name, pool in pools
    )
    nat = config.egress == "nat"
    nats = config.nat_gateways if nat else 0
    addresses = nats if nat else tasks
    endpoints = INTERFACE_ENDPOINTS * config.max_azs if nat else 0
    out = {
        "worker tasks at `min_tasks`": (
            shapes or "none",
            workers,
        ),
        "public IPv4 addresses": (
            f"{addresses} ({'NAT gateways' if nat else 'one per task'})",
            addresses * p["public_ipv4_hour"] * month,
        ),
        "NAT gateways": (str(nats) if nats else "none", nats * p["nat_gateway_hour"] * month),
        "interface endpoints": (
            f"{INTERFACE_ENDPOINTS} services x {config.max_azs} AZs" if endpoints else "none",
            endpoints * p["interface_endpoint_hour_per_az"] * month,
        ),
        "WAF": (
            f"1 web ACL, {WAF_RULES} rules" if config.waf else "none",
            p["waf_web_acl_month"] + WAF_RULES * p["waf_rule_month"] if config.waf else 0.0,
        ),
        "alarms, dashboard, alarm topic key": (
            f"~{ALARMS} alarms",
            ALARMS * p["alarm_metric_month"] + p["dashboard_month"] + p["kms_key_month"],
        ),
    }
    return out


def standing() -> str:
    """What each stage costs a month (730 h) in us-east-1 before any job."""
    from infra.config import STAGES
    from pagefleet.pricing import price_table

    stages = list(STAGES)
    by_stage = {stage: _standing(stage) for stage in stages}
    items = list(by_stage[stages[0]])
    rows = [
        (
            item,
            *(
                f"{by_stage[s][item][0]}: ${by_stage[s][item][1]:,.0f}"
                if by_stage[s][item][1]
                else by_stage[s][item][0]
                for s in stages
            ),
        )
        for item in items
    ]
    rows.append(
        (
            "**about**",
            *(f"**${sum(v for _, v in by_stage[s].values()):,.0f}**" for s in stages),
        )
    )
    header = (
        f"Standing still, per month ({HOURS_PER_MONTH} hours), us-east-1 list prices of "
        f"{price_table()['as_of']} (`pagefleet/pricing/aws_prices.json`), each stage as "
        "`infra/config.py` defines it:"
    )
    return header + "\n\n" + table(("", *(f"`{s}`" for s in stages)), rows)
