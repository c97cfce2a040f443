"""A job's spend cap as its worker holds it: ``max_cost_usd`` in browser-seconds.

The cap is priced once, where the job is made (``pagefleet.tenancy.spend``, on the stage's
worker shape), so the worker that runs the job needs no prices: it stops the run when the
seconds are spent, and a retry gets what the attempts before it left.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The error a job or a session ends with once it has cost its max_cost_usd (never retried).
COST_CAP_KIND = "cost_cap_reached"


class CostCap(BaseModel):
    """A job's ``max_cost_usd`` in browser-seconds, worked out where the job was made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seconds: float = Field(ge=0, description="browser-seconds the cap buys a single attempt")
    attempt_s: float = Field(
        ge=0, description="what each further attempt's fixed share costs, in browser-seconds"
    )

    def left_s(self, attempts_before: int, seconds_before: float) -> float:
        """What an attempt may still spend after ``attempts_before`` attempts that held a
        browser ``seconds_before`` in all (0 or less: nothing)."""
        return self.seconds - attempts_before * self.attempt_s - seconds_before
