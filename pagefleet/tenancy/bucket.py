"""The submission rate limit: a token bucket kept as one number (GCRA).

A tenant may submit ``per_minute`` jobs a minute with bursts of ``burst``. The bucket is the
"theoretical arrival time" ``tat`` (epoch ms): each job pushes it ``interval`` further, from
now or from where it already is; a job is admitted while ``tat`` stays within ``burst``
intervals of now. That is exactly a token bucket of ``burst`` tokens refilled one every
``interval``, held in one number, so the store spends tokens with one conditional write
(``pagefleet.tenancy.ports.TenantCounters.spend``) and never reads then writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The headers of every submission's answer (``Answer.headers``) as OpenAPI documents them,
# after the IETF RateLimit fields. Here, not in admission: the routes import it at load.
RATE_HEADERS_DOC: dict[str, Any] = {
    name: {"description": text, "schema": {"type": "integer"}}
    for name, text in (
        ("RateLimit-Limit", "submissions allowed at once (the tenant's burst)"),
        ("RateLimit-Remaining", "submissions the rate allows right now"),
        ("RateLimit-Reset", "seconds until the whole burst is available again"),
    )
}


@dataclass(frozen=True)
class Bucket:
    per_minute: int
    burst: int

    @property
    def interval_ms(self) -> int:
        return math.ceil(60_000 / self.per_minute)

    @property
    def tolerance_ms(self) -> int:
        return self.burst * self.interval_ms

    def cost_ms(self, jobs: int) -> int:
        return jobs * self.interval_ms

    def available(self, tat_ms: int | None, now_ms: int) -> int:
        """Tokens in the bucket now."""
        start = max(tat_ms or 0, now_ms)
        return max(0, (now_ms + self.tolerance_ms - start) // self.interval_ms)


@dataclass(frozen=True)
class Spend:
    """The answer to spending tokens: admitted or not, and what the headers say."""

    allowed: bool
    limit: int
    remaining: int
    reset_s: int  # until the bucket is full again
    retry_after_s: int = 0  # until enough tokens are back

    def headers(self) -> dict[str, str]:
        out = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_s),
        }
        if not self.allowed:
            out["Retry-After"] = str(self.retry_after_s)
        return out


def answer(bucket: Bucket, *, allowed: bool, tat_ms: int | None, now_ms: int, cost: int) -> Spend:
    """The headers of a spend, from the bucket's ``tat`` after it (admitted) or as it was
    (refused). ``retry_after_s``: until ``cost`` more tokens are there (one, once admitted)."""
    start = max(tat_ms or 0, now_ms)
    reset_s = math.ceil((start - now_ms) / 1000)
    remaining = bucket.available(tat_ms, now_ms)
    wanted = 1 if allowed else cost
    short_ms = start + bucket.cost_ms(wanted) - bucket.tolerance_ms - now_ms
    retry = max(0, math.ceil(short_ms / 1000))
    return Spend(allowed, bucket.burst, remaining, reset_s, retry if allowed else max(1, retry))
