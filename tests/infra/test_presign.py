"""Presigned artifact URLs are SigV4: regions opened since 2014 (ap-south-1, one of the
price table's two) refuse SigV2, which botocore may still pick for S3."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import CoreSettings

pytestmark = pytest.mark.infra


@pytest.mark.parametrize("region", ["ap-south-1", "us-east-1"])
def test_presigned_urls_are_sigv4(region, monkeypatch) -> None:
    # Presigning is local (no request is sent); no endpoint override, as on AWS.
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv("AWS_REGION", region)
    RUNTIME.reset()
    try:
        settings = CoreSettings(
            jobs_table="jobs",
            tenants_table="tenants",
            artifacts_bucket="pagefleet-artifacts",
            queue_urls={"standard": "https://sqs.example.invalid/1/q"},
        )
        url = RUNTIME.job_services(settings).artifacts.presign_get(
            "acme/job/1/page.png", 300, download_name="page.png"
        )
    finally:
        RUNTIME.reset()
    query = parse_qs(urlparse(url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == ["300"]
    assert f"/{region}/s3/aws4_request" in query["X-Amz-Credential"][0]
    assert "Signature" not in query and "AWSAccessKeyId" not in query  # no SigV2
