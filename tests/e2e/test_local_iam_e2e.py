"""The local stack under the template's IAM: each part signs as its own principal, every call
is checked (the module's teardown fails on any refusal), and the paths IAM matters for on
AWS work here as they must there: a session never saved, a tenant's secret, an artifact
link the API signed."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.stack import LocalStack
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_use_session_of_a_session_never_saved_runs_when_not_required(stack: LocalStack) -> None:
    """On AWS the job role's missing s3:ListBucket made S3 answer 403: the job retried until
    it failed. With the listing grant it is a 404, and the job runs without the session."""
    client = stack.client(stack.create_tenant_key("first-run"))
    job = client.submit(
        {
            "steps": [
                {"action": "use_session", "name": "never-saved", "required": False},
                {"action": "goto", "url": f"{stack.site_url}/"},
                {"action": "extract", "name": "title", "selector": "h1"},
            ]
        }
    )
    done = client.wait(job.job_id, timeout=180)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.attempt == 1


def test_a_tenants_secret_is_read_with_the_tenants_job_role(stack: LocalStack) -> None:
    client = stack.client(stack.create_tenant_key("secretive"))
    RUNTIME.client("secretsmanager").create_secret(
        Name="pagefleet/local/secretive/password", SecretString="s3cret-value"
    )
    job = client.submit(
        {
            "steps": [
                {"action": "goto", "url": f"{stack.site_url}/login.html"},
                {"action": "fill", "selector": "#password", "value": "{{secrets.password}}"},
                {"action": "screenshot", "name": "filled.png"},
            ]
        }
    )
    done = client.wait(job.job_id, timeout=180)
    assert done.status is JobStatus.SUCCEEDED, done.error
    # The link the API signed (as its own role) downloads, checksum and all.
    [shot] = [a for a in client.artifacts(job.job_id) if a.name == "filled.png"]
    assert client.download_verified(shot).startswith(b"\x89PNG")


def test_a_fire_the_scheduler_function_fails_is_recorded_with_its_role(stack: LocalStack) -> None:
    """The Scheduler invokes the function asynchronously: a fire it fails (here one that is
    not a fire at all) is tried three times, then Lambda records it in the fires DLQ with the
    function's role, which the template lets send there (a refusal fails this module)."""
    assert stack.provisioned is not None and stack.provisioned.schedule_group
    settings = stack.provisioned.scheduler_settings()
    at = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S")
    RUNTIME.client("scheduler").create_schedule(
        Name="not-a-fire",
        GroupName=stack.provisioned.schedule_group,
        ScheduleExpression=f"at({at})",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": settings["scheduler_target_arn"],
            "RoleArn": settings["scheduler_role_arn"],
            "Input": json.dumps({"tenant_id": "nobody"}),
        },
    )
    sqs = RUNTIME.client("sqs")
    deadline = time.monotonic() + 60
    records: list[dict[str, Any]] = []
    while not records and time.monotonic() < deadline:
        answer = sqs.receive_message(
            QueueUrl=stack.provisioned.scheduler_dlq_url, WaitTimeSeconds=1, VisibilityTimeout=0
        )
        records = [json.loads(m["Body"]) for m in answer.get("Messages", [])]
    assert records, "the failed fire was never recorded"
    (record,) = records
    assert record["requestPayload"] == {"tenant_id": "nobody"}
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3


def test_every_part_ran_as_its_own_principal_and_nothing_was_refused(stack: LocalStack) -> None:
    assert stack.iam.on
    report = stack.iam_report()
    for principal in (
        "function/api",
        "function/authorizer",
        "function/job_changes",
        "worker/standard",
        "job-role",
    ):
        assert report["calls"].get(principal, 0) > 0, (principal, report["calls"])
    assert report["denied"] == []
