"""A job record as the tests build one: a one-step job of tenant ``t``, fields as given."""

from __future__ import annotations

from typing import Any

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

PLAIN_REQUEST = {"steps": [{"action": "goto", "url": "http://x/"}]}
CREATED_AT = "2027-01-15T08:00:00.000Z"


def job_record(**fields: Any) -> JobRecord:
    """A running job ``j1`` of tenant ``t`` (one ``goto``), with ``fields`` over it."""
    made: dict[str, Any] = {
        "tenant_id": "t",
        "job_id": "j1",
        "status": JobStatus.RUNNING,
        "request": JobRequest.model_validate(PLAIN_REQUEST),
        "created_at": CREATED_AT,
        "updated_at": CREATED_AT,
        "correlation_id": "c",
        "pool": "standard",
    }
    return JobRecord(**{**made, **fields})
