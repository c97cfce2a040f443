"""10% of AWS calls fail like AWS fails them (throttling, 5xx, replies lost after the call
applied), in the workers and in the API's handlers: every job still ends once, correctly."""

from __future__ import annotations

import pytest

from devstack.chaos import (
    ChaosSite,
    aws_fault_env,
    hang_job,
    injected_faults,
    page_job,
    wait_settled,
)
from devstack.stack import LocalStack
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.states import JobStatus

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FAULT_RATE = 0.1
# The workers and every Lambda function (API, sweeper, dead letters) in its environments.
WORKER_ENV = aws_fault_env(FAULT_RATE)
LAMBDA_ENV = aws_fault_env(FAULT_RATE)
PAGE_JOBS = 24


def _submit(client: PagefleetClient, body: dict[str, object], key: str) -> str:
    """Submit as a careful client does: retry a 5xx with the same idempotency key."""
    for _ in range(5):
        try:
            return client.submit(body, idempotency_key=key).job_id
        except ApiError as exc:
            if exc.status < 500:
                raise
    raise AssertionError(f"submit {key} kept failing")


def test_jobs_end_once_in_their_right_state_under_aws_faults(
    stack: LocalStack, client: PagefleetClient, store: DynamoJobStore, site: ChaosSite
) -> None:
    pages = [_submit(client, page_job(site, f"p{n}"), f"page-{n}") for n in range(PAGE_JOBS)]
    hangs = [_submit(client, hang_job(site, f"h{n}"), f"hang-{n}") for n in range(2)]

    report = wait_settled(store, [*pages, *hangs], timeout=300)

    assert not report.lost, [report.records.get(j) for j in report.lost]
    assert not report.doubled and not report.inconsistent
    for job_id in pages:
        record = report.records[job_id]
        assert record.status is JobStatus.SUCCEEDED, record.error
        assert record.result == {"title": record.request.name}
    for job_id in hangs:
        record = report.records[job_id]
        assert record.status is JobStatus.TIMED_OUT and record.error is not None
        assert record.error.timeout == "job"
    api_log = stack.function_logs()["api"]
    assert injected_faults(api_log) > 0, "no fault was injected in the API"
