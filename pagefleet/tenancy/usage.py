"""Usage: what each attempt used, summed per tenant and day and per workflow, and priced.

The worker records one ``AttemptUsage`` per attempt it ran (browser-seconds of its slot,
the requests the page made, artifact bytes and uploads); the store adds it to the tenant's
day and to the day of its workflow at most once per (job, attempt). What the platform
spends around a job (the API call, queue messages, table writes, Lambda time) is not
measured per job: ``as_priced`` estimates it from the counts with the figures below, so
the price table prices everything a job costs.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.pricing import REGIONS, Usage, Worker, as_dict, cost

ALL_WORKFLOWS = "*"
# A job without a name or workflow is counted under this workflow name.
UNNAMED = "(unnamed)"
# How many days one usage query may span.
MAX_DAYS = 92

# What a job and an attempt cost around the browser, by count (see the module docstring).
# Table writes are write units: a write costs one per KB of the item (the larger of its
# before and after), twice that in a transaction, and each global secondary index it touches
# bills its own: one write to enter or leave it, two when the item's index key changes, one
# for an update in place (the jobs table's three indexes project every attribute, so such a
# write is as big as the table's). Measured with `bench/write_units.py` (the jobs table's
# stream, every write sized as DynamoDB sizes it; docs/decisions.md, 2026-12-07): a plain
# job's record is under 1 KB until its outcome (its request kept without its defaults), 1 unit
# a write in the table and as much in each index it is in; ~1.3 KB finished.
PER_JOB = {
    "api_requests": 1,  # the submission
    "lambda_invocations": 2,  # the API call and the authorizer (cached calls are free)
    "lambda_gb_seconds": 0.1,  # 1 GB for ~100 ms
    "queue_requests": 1,  # the send
    # the record (1; by_status 1, unqueued 1), marked enqueued (1; by_status 1, unqueued 1),
    # idempotency key, rate bucket and queued count up (one write), queued count down, the
    # notification's delivery mark
    "table_writes": 10,
    "table_reads": 2,
}
PER_ATTEMPT = {
    # the receive, the high queue looked at beside it (empty, still billed), the delete
    # (batched, ten a request)
    "queue_requests": 2,
    # the claim with its first run-event numbers (1; by_status 2: its key moves, ops 1: it
    # enters), the outcome with its expiry (2; by_status 3, ops 1: it leaves), the running
    # slot taken and given back, the run's events (one batch, compressed: 1), usage (3 items
    # in a transaction: 6; the day's by_day entry 1)
    "table_writes": 20,
    "table_reads": 1,  # limits (the look before the claim reads the message's preview)
}
# Heartbeats (queue visibility + lease) every 15 s of browser time.
HEARTBEAT_S = 15
# A heartbeat's lease write: the record (1), by_status in place (1), ops's key moves (1 + 1).
HEARTBEAT_WRITES = 4
# Lambda invocations of the jobs stream reader per job change it reads (batched).
STREAM_SHARE = 0.2


class AttemptUsage(BaseModel):
    """What one attempt used, as the worker measured it."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    tenant_id: str
    job_id: str
    attempt: int = Field(ge=1)
    workflow: str = UNNAMED
    day: str = Field(description="UTC day the attempt ended, YYYY-MM-DD")
    first_attempt: bool = Field(description="the job's first attempt: counts the job")
    browser_seconds: float = Field(ge=0)
    page_requests: int = Field(default=0, ge=0)
    artifact_bytes: int = Field(default=0, ge=0)
    artifact_puts: int = Field(default=0, ge=0)
    status: str | None = None
    ended_at: str | None = None


class UsageRow(BaseModel):
    """Usage summed over a day, for a tenant (``workflow == "*"``) or one of its workflows."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    tenant_id: str
    day: str
    workflow: str = ALL_WORKFLOWS
    jobs: int = 0
    attempts: int = 0
    browser_seconds: float = 0.0
    page_requests: int = 0
    artifact_bytes: int = 0
    artifact_puts: int = 0

    def add(self, other: UsageRow | AttemptUsage) -> UsageRow:
        counts = counts_of(other)
        return self.model_copy(update={k: getattr(self, k) + v for k, v in counts.items()})


def counts_of(item: UsageRow | AttemptUsage) -> dict[str, Any]:
    """The additive counts (what the store ADDs to a day)."""
    if isinstance(item, AttemptUsage):
        return {
            "jobs": int(item.first_attempt),
            "attempts": 1,
            "browser_seconds": item.browser_seconds,
            "page_requests": item.page_requests,
            "artifact_bytes": item.artifact_bytes,
            "artifact_puts": item.artifact_puts,
        }
    return {
        "jobs": item.jobs,
        "attempts": item.attempts,
        "browser_seconds": item.browser_seconds,
        "page_requests": item.page_requests,
        "artifact_bytes": item.artifact_bytes,
        "artifact_puts": item.artifact_puts,
    }


def as_priced(row: UsageRow) -> Usage:
    """The row as the price table's ``Usage``: measured counts plus the platform's share."""
    jobs, attempts = row.jobs, row.attempts
    heartbeats = row.browser_seconds / HEARTBEAT_S
    return Usage(
        jobs=jobs,
        browser_seconds=row.browser_seconds,
        api_requests=round(jobs * PER_JOB["api_requests"]),
        lambda_invocations=round(
            jobs * PER_JOB["lambda_invocations"] + (jobs + attempts * 2) * STREAM_SHARE
        ),
        lambda_gb_seconds=jobs * PER_JOB["lambda_gb_seconds"],
        queue_requests=round(
            jobs * PER_JOB["queue_requests"] + attempts * PER_ATTEMPT["queue_requests"] + heartbeats
        ),
        table_writes=round(
            jobs * PER_JOB["table_writes"]
            + attempts * PER_ATTEMPT["table_writes"]
            + heartbeats * HEARTBEAT_WRITES
        ),
        table_reads=round(jobs * PER_JOB["table_reads"] + attempts * PER_ATTEMPT["table_reads"]),
        artifact_puts=row.artifact_puts,
        artifact_bytes=row.artifact_bytes,
    )


def priced(row: UsageRow, worker: Worker, retention_days: float) -> dict[str, Any]:
    """Cost of a row in every priced region (us-east-1 and ap-south-1)."""
    usage = as_priced(row)
    return {
        region: as_dict(cost(usage, region, worker, retention_days=retention_days))
        for region in REGIONS
    }


def total(rows: list[UsageRow], tenant_id: str, label: str) -> UsageRow:
    out = UsageRow(tenant_id=tenant_id, day=label)
    for row in rows:
        out = out.add(row)
    return out


def day_of(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).date().isoformat()


def day_range(first: str, last: str) -> list[str]:
    """Every day from ``first`` to ``last`` (inclusive), ISO dates; refuses a reversed or too
    long range with ValueError."""
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    if end < start:
        raise ValueError("to is before from")
    span = (end - start).days + 1
    if span > MAX_DAYS:
        raise ValueError(f"at most {MAX_DAYS} days at once, asked for {span}")
    return [(start + timedelta(days=n)).isoformat() for n in range(span)]
