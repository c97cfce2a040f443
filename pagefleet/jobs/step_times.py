"""Each top-level step of an attempt: when it started, how long it took, how it ended, and
its share of the job's price (``pagefleet.tenancy.spend.step_cost_usd``).

The worker keeps them with the attempt's outcome (``AttemptRecord.steps``), so a job's view
shows them after its run; the run events (``step_finished``) carry the same figures for
every step, nested ones included, while it runs. A record keeps the first
``STEP_TIMES_MAX`` steps of its latest attempt only (an earlier attempt's are in its
events), so a job record stays inside one DynamoDB item whatever its workflow.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

STEP_TIMES_MAX = 100
# One entry's JSON at most (attribute names, an action name, an ISO time, four numbers).
STEP_TIME_BYTES = 160


class StepTime(BaseModel):
    """One top-level step of an attempt, as it ran."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    index: int = Field(ge=0, description="the step's index in `steps`")
    action: str = Field(max_length=40)
    started_at: str = Field(description="when it started (ISO 8601, UTC, milliseconds)")
    duration_ms: int = Field(ge=0)
    outcome: Literal["ok", "failed", "stopped"]
    cost_usd: float = Field(
        ge=0,
        description="its share of the job's price: its browser time at the rate usage "
        "prices (us-east-1; the fixed shares per job and attempt are the job's, not a step's)",
    )
