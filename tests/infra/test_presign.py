"""Presigned artifact URLs are SigV4 (regions opened since 2014, ap-south-1 among them, refuse
SigV2, which botocore may still pick for S3) and name the bucket's regional host: the global
one redirects (307) for a new bucket outside us-east-1, which breaks the signature. No
request is sent: presigning is local, the URL is inspected."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import CoreSettings

pytestmark = pytest.mark.infra


def presign(monkeypatch, region: str, endpoint: str | None = None) -> str:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    if endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
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
    return str(url)


@pytest.mark.parametrize("region", ["ap-south-1", "us-east-1"])
def test_presigned_urls_are_sigv4_for_the_regional_host(region, monkeypatch) -> None:
    url = presign(monkeypatch, region)  # no endpoint override, as on AWS
    parsed = urlparse(url)
    assert (parsed.scheme, parsed.netloc) == (
        "https",
        f"pagefleet-artifacts.s3.{region}.amazonaws.com",
    )
    assert parsed.path == "/acme/job/1/page.png"
    query = parse_qs(parsed.query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == ["300"]
    assert f"/{region}/s3/aws4_request" in query["X-Amz-Credential"][0]
    assert "Signature" not in query and "AWSAccessKeyId" not in query  # no SigV2


def test_on_the_embedded_aws_presigned_urls_stay_on_its_endpoint(monkeypatch) -> None:
    url = urlparse(presign(monkeypatch, "us-east-1", endpoint="http://localhost:4566"))
    assert (url.netloc, url.path) == ("localhost:4566", "/pagefleet-artifacts/acme/job/1/page.png")
