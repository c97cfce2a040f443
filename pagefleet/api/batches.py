"""``POST /v1/batches``: up to 100 jobs in one request, each answered on its own.

The results carry the job views of the API's contract (``pagefleet.api.jobs``), which is
why these bodies live beside them and not with the tenancy views.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.api.jobs import JobView
from pagefleet.jobs.submission import JobSubmission
from pagefleet.view import View


class BatchItemResult(View):
    index: int
    status: int = Field(description="as the job alone would have been answered: 202, 409, 429...")
    job_id: str | None = None
    replayed: bool = False
    job: JobView | None = None
    error: dict[str, Any] | None = None


class BatchResponse(View):
    accepted: int
    results: list[BatchItemResult]


class BatchJob(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    job: JobSubmission
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)


class BatchRequest(BaseModel):
    """``POST /v1/batches``: up to 100 jobs, each with its own Idempotency-Key."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[BatchJob] = Field(min_length=1, max_length=100)
