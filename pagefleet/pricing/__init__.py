"""What the recorded usage costs on AWS, from one dated price table.

The table (``aws_prices.json``) is data with its date and source; this module only applies
it. A ``Usage`` is what pagefleet counts per attempt (browser-seconds of a worker slot,
requests, writes, bytes); ``cost`` prices it per service for one region, splitting a
Fargate task's price over its slots, since a slot is what one job occupies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from typing import Any

REGIONS = ("us-east-1", "ap-south-1")
SECONDS_PER_MONTH = 30 * 24 * 3600


@dataclass(frozen=True)
class Usage:
    """Counts that a job (or a day, a workflow, a tenant) used. Everything adds up."""

    jobs: int = 0
    browser_seconds: float = 0.0  # slot time on a worker, from claim to outcome
    api_requests: int = 0  # REST calls through API Gateway (submit, polls, listings)
    lambda_invocations: int = 0
    lambda_gb_seconds: float = 0.0
    queue_requests: int = 0  # SQS sends, receives, deletes, visibility changes
    table_writes: int = 0  # DynamoDB write units
    table_reads: int = 0  # DynamoDB read units
    artifact_puts: int = 0
    artifact_gets: int = 0
    artifact_bytes: int = 0
    log_bytes: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def scaled(self, factor: float) -> Usage:
        values: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name) * factor
            values[f.name] = value if isinstance(getattr(self, f.name), float) else round(value)
        return Usage(**values)


@dataclass(frozen=True)
class Worker:
    """The Fargate task a job's slot lives in (from the stage's pool config)."""

    vcpu: float = 1.0
    memory_gb: float = 2.0
    slots: int = 2
    architecture: str = "x86_64"
    spot: bool = False


@dataclass(frozen=True)
class Cost:
    region: str
    by_service: dict[str, float] = field(default_factory=dict)
    # Days artifacts are kept (their storage is part of what a job costs).
    retention_days: float = 7.0

    @property
    def total(self) -> float:
        return sum(self.by_service.values())


@cache
def price_table() -> dict[str, Any]:
    text = resources.files("pagefleet.pricing").joinpath("aws_prices.json").read_text()
    table: dict[str, Any] = json.loads(text)
    return table


def cost(
    usage: Usage, region: str, worker: Worker | None = None, *, retention_days: float = 7.0
) -> Cost:
    """Price ``usage`` in ``region`` (one of ``REGIONS``)."""
    prices = price_table()["regions"][region]
    worker = worker or Worker()
    arch = worker.architecture
    if worker.spot and arch != "x86_64":
        # Fargate Spot places x86_64 Linux tasks only: a Graviton Spot price does not exist.
        raise ValueError(f"Fargate Spot runs x86_64 tasks only, not {arch}")
    task_hour = (
        worker.vcpu * prices["fargate_vcpu_hour"][arch]
        + worker.memory_gb * prices["fargate_gb_hour"][arch]
    )
    if worker.spot:
        task_hour *= 1 - prices["fargate_spot_discount"]
    slot_second = task_hour / 3600 / max(1, worker.slots)
    storage_months = retention_days * 86400 / SECONDS_PER_MONTH
    by_service = {
        "fargate": usage.browser_seconds * slot_second,
        "lambda": usage.lambda_invocations * prices["lambda_request"]
        + usage.lambda_gb_seconds * prices["lambda_gb_second"]["arm64"],
        "api_gateway": usage.api_requests * prices["apigw_rest_request"],
        "sqs": usage.queue_requests * prices["sqs_request"],
        "dynamodb": usage.table_writes * prices["dynamodb_write_unit"]
        + usage.table_reads * prices["dynamodb_read_unit"],
        "s3": usage.artifact_puts * prices["s3_put_request"]
        + usage.artifact_gets * prices["s3_get_request"]
        + usage.artifact_bytes / 1e9 * prices["s3_gb_month"] * storage_months,
        "cloudwatch_logs": usage.log_bytes / 1e9 * prices["cloudwatch_logs_gb"],
    }
    return Cost(region=region, by_service=by_service, retention_days=retention_days)


def as_dict(priced: Cost) -> dict[str, Any]:
    return {
        "region": priced.region,
        "total_usd": round(priced.total, 6),
        "by_service_usd": {k: round(v, 6) for k, v in priced.by_service.items()},
        "prices_as_of": price_table()["as_of"],
    }
