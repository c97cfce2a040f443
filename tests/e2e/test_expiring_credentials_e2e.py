"""A job that outlives its job-role credentials still uploads its artifacts: the local stack
issues AssumeRole sessions of 15 seconds and refuses a key past its expiration (as AWS
refuses one: ExpiredToken), and the worker's tenant stores renew their credentials (real
Chromium, the template's IAM)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from devstack.stack import LocalStack
from devstack.sts_lifetime import REPORT_PATH
from pagefleet.jobs.states import JobStatus
from tests.e2e.conftest import running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Short: the job's sleep outlasts it. Nothing signs with the tenant's key between the first
# screenshot (a few seconds in) and the second (after the sleep), so no request is in flight
# at the expiry.
LIFETIME_S = 15


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    yield from running(LocalStack(api_port=0, workers=1, concurrency=1, sts_lifetime_s=LIFETIME_S))


def sts_report(stack: LocalStack) -> dict[str, object]:
    with httpx.Client(trust_env=False, timeout=10) as http:
        return dict(http.get(f"{stack.aws_endpoint}{REPORT_PATH}").json())


def test_a_job_longer_than_its_credentials_uploads_every_artifact(stack: LocalStack) -> None:
    client = stack.client(stack.create_tenant_key("long-runner"))
    job = client.submit(
        {
            "steps": [
                {"action": "goto", "url": f"{stack.site_url}/"},
                {"action": "screenshot", "name": "before.png"},
                # Past the first session's end: its key is refused from then on.
                {"action": "sleep", "ms": (LIFETIME_S + 10) * 1000},
                {"action": "screenshot", "name": "after.png"},
            ],
        }
    )
    done = client.wait(job.job_id, timeout=300)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.attempt == 1
    links = {a.name: a for a in client.artifacts(job.job_id)}
    assert {"before.png", "after.png"} <= set(links)
    for name in ("before.png", "after.png"):
        assert client.download_verified(links[name]).startswith(b"\x89PNG")
    report = sts_report(stack)
    assert report["lifetime_s"] == LIFETIME_S
    assert isinstance(report["issued"], int) and report["issued"] >= 2  # renewed mid-job
    assert report["expired_refused"] == []


def test_an_artifact_link_past_its_time_is_refused_as_s3_refuses_it(stack: LocalStack) -> None:
    """The embedded AWS process runs presigned links out (devstack.presigned_urls): one made
    for a second is refused two seconds later, one made for ten minutes still downloads."""
    import time

    import boto3
    from botocore.config import Config

    from devstack.constants import LOCAL_REGION, aws_env

    env = aws_env(stack.aws_endpoint)
    s3 = boto3.client(
        "s3",
        endpoint_url=stack.aws_endpoint,
        region_name=LOCAL_REGION,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        config=Config(signature_version="s3v4"),
    )
    assert stack.provisioned is not None
    where = {"Bucket": stack.provisioned.artifacts_bucket, "Key": "probe/link.txt"}
    s3.put_object(**where, Body=b"short-lived")
    # X-Amz-Date is in whole seconds: a link of one second may already be over when first
    # used, so the one that downloads lives ten minutes and the one refused one second.
    lasting = s3.generate_presigned_url("get_object", Params=where, ExpiresIn=600)
    brief = s3.generate_presigned_url("get_object", Params=where, ExpiresIn=1)
    time.sleep(2.2)  # past the brief one's date + 1 s, whatever its second's fraction
    with httpx.Client(trust_env=False, timeout=10) as http:
        assert http.get(lasting).content == b"short-lived"
        refused = http.get(brief)
    assert refused.status_code == 403
    assert "Request has expired" in refused.text
