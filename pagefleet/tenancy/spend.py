"""What a job's browser time costs, and the browser time a ``max_cost_usd`` buys.

Priced as ``bench/cost.py`` and ``GET /v1/usage`` price usage: browser-seconds on the
stage's worker shape (``CoreSettings.pricing_worker``) plus the platform's share per job and
per attempt (``as_priced``), in the first of the price table's regions (us-east-1). A step's
share of its job's price is its browser time at that rate (``step_cost_usd``): the shares of
a job's steps add up to its price less the fixed shares and the time around its steps
(opening the browser's context, uploading artifacts).
"""

from __future__ import annotations

from functools import cache

from pagefleet.errors import InvalidField
from pagefleet.jobs.spend import CostCap
from pagefleet.pricing import REGIONS, Worker, cost
from pagefleet.tenancy.usage import UsageRow, as_priced

PRICED_IN = REGIONS[0]
# A step of 100 ms costs well under a millionth of a dollar: priced to the nano-dollar.
STEP_COST_DIGITS = 9
_HOUR_S = 3600.0


def cost_usd(browser_seconds: float, worker: Worker, *, attempts: int = 1) -> float:
    """One job that held a browser this long over ``attempts`` attempts, priced."""
    row = UsageRow(tenant_id="", day="", jobs=1, attempts=attempts, browser_seconds=browser_seconds)
    return cost(as_priced(row), PRICED_IN, worker).total


@cache
def per_second_usd(worker: Worker) -> float:
    """What one more second of a browser costs: the slot's share of its Fargate task and
    the heartbeats that second brings (the fixed shares per job and attempt left out)."""
    return (cost_usd(_HOUR_S, worker) - cost_usd(0.0, worker)) / _HOUR_S


def step_cost_usd(seconds: float, worker: Worker) -> float:
    """A step's share of its job's price: the browser time it held, at the job's rate."""
    return round(max(0.0, seconds) * per_second_usd(worker), STEP_COST_DIGITS)


def cost_cap_s(max_cost_usd: float, worker: Worker, *, what: str = "opening a session") -> float:
    """The browser-seconds ``max_cost_usd`` buys one attempt (its fixed share, then a rate per
    second); 422 naming ``max_cost_usd`` when it does not cover the start."""
    floor = cost_usd(0.0, worker)
    if max_cost_usd <= floor:
        raise InvalidField(
            f"max_cost_usd {max_cost_usd} does not cover {what} "
            f"(${floor:.6f} before its first second); give more, or leave it out",
            field="max_cost_usd",
        )
    return (max_cost_usd - floor) / per_second_usd(worker)


def job_cost_cap(max_cost_usd: float, worker: Worker) -> CostCap:
    """The cap of a job with ``max_cost_usd`` (422 when it does not cover a first attempt)."""
    seconds = cost_cap_s(max_cost_usd, worker, what="running a job")
    attempt_usd = cost_usd(0.0, worker, attempts=2) - cost_usd(0.0, worker)
    attempt_s = attempt_usd / per_second_usd(worker)
    return CostCap(seconds=round(seconds, 3), attempt_s=round(attempt_s, 3))
