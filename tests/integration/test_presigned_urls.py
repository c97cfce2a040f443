"""Presigned S3 URLs run out in the embedded AWS as on S3 (devstack.presigned_urls, in front
of a real moto server): the API's artifact links answer until their ``expires_in`` and are
refused after it, with S3's ``AccessDenied`` "Request has expired"; a life over a week is
refused at once. moto alone serves every one of them, whatever its age. The clock is the
test's, so a link's end is met without waiting for it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config

from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
from devstack.iam.local import SECRET as LOCAL_SECRET
from devstack.presigned_urls import MAX_EXPIRES_S, PresignedExpiry
from devstack.provision import Provisioned
from pagefleet.adapters.s3 import S3ArtifactStore
from tests.support.fronts import Clock, served_behind

TTL_S = 300


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def enforced() -> list[bool]:
    return [True]


@pytest.fixture
def front(
    moto_endpoint: str, clock: Clock, enforced: list[bool]
) -> Iterator[tuple[str, PresignedExpiry]]:
    """This process's moto backends (the session's server) behind the presigned URLs' rule."""
    with served_behind(
        lambda app: PresignedExpiry(app, clock=clock, enforced=lambda: enforced[0])
    ) as served:
        yield served


def _s3_as(endpoint: str, key: str, secret: str, token: str | None = None) -> Any:
    """An S3 client signing as the runtimes sign (Signature Version 4: pagefleet.runtime)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=LOCAL_REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=Config(signature_version="s3v4"),
    )


@pytest.fixture
def store(front: tuple[str, PresignedExpiry], provisioned: Provisioned) -> S3ArtifactStore:
    endpoint, _ = front
    return S3ArtifactStore(_s3_as(endpoint, "testing", "testing"), provisioned.artifacts_bucket)


def a_link(store: S3ArtifactStore, ttl_s: int = TTL_S) -> str:
    artifact = store.put(
        tenant_id="tenant-a",
        job_id="job-1",
        attempt=1,
        name="page.png",
        data=b"\x89PNG-bytes",
        content_type="image/png",
    )
    return store.presign_get(artifact.key, ttl_s)


def signed_at(link: str) -> float:
    """When a link was signed, as S3 reads it (whole seconds): the test's clock moves from
    there, not from when the test began (a loaded machine may sign seconds later)."""
    query = parse_qs(urlsplit(link).query)
    if "X-Amz-Date" in query:
        return (
            datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ")
            .replace(tzinfo=UTC)
            .timestamp()
        )
    return float(query["Expires"][0]) - TTL_S  # Signature Version 2: its end


def get(url: str, method: str = "GET") -> httpx.Response:
    with httpx.Client(trust_env=False, timeout=10) as http:
        return http.request(method, url)


def test_an_artifact_link_answers_until_its_time_and_is_refused_after_it(
    store: S3ArtifactStore, front: tuple[str, PresignedExpiry], clock: Clock
) -> None:
    _, app = front
    link = a_link(store)
    assert get(link).content == b"\x89PNG-bytes"
    clock.now = signed_at(link) + TTL_S - 1  # near its end: still good, as often as asked
    assert get(link).status_code == 200
    assert get(link).status_code == 200
    clock.now = signed_at(link) + TTL_S + 1
    refused = get(link)
    assert refused.status_code == 403
    assert "<Code>AccessDenied</Code><Message>Request has expired</Message>" in refused.text
    assert f"<X-Amz-Expires>{TTL_S}</X-Amz-Expires>" in refused.text
    assert get(link, "HEAD").status_code == 403  # a HEAD: the status alone
    assert app.refused == 2
    # A link made at the server's time is good: the object did not go, the old link did.
    clock.now = time.time()
    assert get(a_link(store)).status_code == 200


def test_moto_alone_serves_a_link_past_its_time(
    store: S3ArtifactStore, clock: Clock, enforced: list[bool]
) -> None:
    """What the rule closes: without it an expired link downloads, as it never does on S3."""
    link = a_link(store)
    clock.now += TTL_S * 10
    enforced[0] = False
    assert get(link).status_code == 200
    enforced[0] = True
    assert get(link).status_code == 403


def test_a_link_of_more_than_a_week_is_refused_at_once(store: S3ArtifactStore) -> None:
    assert get(a_link(store, MAX_EXPIRES_S)).status_code == 200
    refused = get(a_link(store, MAX_EXPIRES_S + 1))
    assert refused.status_code == 400
    assert "<Code>AuthorizationQueryParametersError</Code>" in refused.text
    assert "must be less than a week" in refused.text


def test_a_link_with_a_date_or_life_that_is_not_one_is_refused(store: S3ArtifactStore) -> None:
    link = a_link(store)
    for broken in (
        link.replace("X-Amz-Expires=300", "X-Amz-Expires=soon"),
        link.replace("X-Amz-Date=", "X-Amz-Date=x"),
    ):
        answer = get(broken)
        assert answer.status_code == 400, broken
        assert "AuthorizationQueryParametersError" in answer.text


def test_a_signature_version_2_link_runs_out_too(
    store: S3ArtifactStore,
    provisioned: Provisioned,
    front: tuple[str, PresignedExpiry],
    clock: Clock,
) -> None:
    endpoint, _ = front
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name=LOCAL_REGION, aws_access_key_id="testing",
        aws_secret_access_key="testing", config=Config(signature_version="s3"),
    )  # fmt: skip
    a_link(store)
    key = "tenant-a/job-1/1/page.png"
    params = {"Bucket": provisioned.artifacts_bucket, "Key": key}
    link = s3.generate_presigned_url("get_object", Params=params, ExpiresIn=TTL_S)
    assert "AWSAccessKeyId=" in link
    assert get(link).status_code == 200
    clock.now = signed_at(link) + TTL_S + 1
    assert "Request has expired" in get(link).text


def test_the_sdk_says_a_link_ran_out_and_what_to_do(store: S3ArtifactStore, clock: Clock) -> None:
    from pagefleet.client import ApiError, PagefleetClient

    link = a_link(store)
    with PagefleetClient("http://127.0.0.1:9", None) as client:
        assert client.download(link) == b"\x89PNG-bytes"
        clock.now = signed_at(link) + TTL_S + 1
        with pytest.raises(ApiError) as refused:
            client.download(link)
    assert refused.value.code == "link_expired"
    assert "list the job's artifacts again" in str(refused.value)


def test_a_link_changed_after_it_was_signed_is_refused_as_s3_refuses_it(
    store: S3ArtifactStore, front: tuple[str, PresignedExpiry], provisioned: Provisioned
) -> None:
    """S3 computes the signature again from what arrived; moto looks at none of it."""
    endpoint, _ = front
    link = a_link(store)
    signature = link.rsplit("X-Amz-Signature=", 1)[1]
    for changed in (
        link.replace(f"X-Amz-Signature={signature}", f"X-Amz-Signature={'0' * 64}"),
        link + "&response-content-type=text%2Fhtml",  # a parameter added
        link.replace("page.png", "other.png"),  # another object
    ):
        refused = get(changed)
        assert refused.status_code == 403, changed
        assert "<Code>SignatureDoesNotMatch</Code>" in refused.text
    # Signed with a key the embedded AWS knows but another secret: refused too.
    where = {"Bucket": provisioned.artifacts_bucket, "Key": "tenant-a/job-1/1/page.png"}
    wrong = _s3_as(endpoint, "testing", "not-its-secret")
    assert get(wrong.generate_presigned_url("get_object", Params=where)).status_code == 403
    # A key it does not know (no secret to check against) passes as moto lets it.
    unknown = _s3_as(endpoint, "AKIAUNKNOWN000000000", "whatever")
    assert get(unknown.generate_presigned_url("get_object", Params=where)).status_code == 200


def test_links_as_the_api_makes_them_pass_their_signature_check(
    store: S3ArtifactStore, front: tuple[str, PresignedExpiry], provisioned: Provisioned
) -> None:
    """Keys with spaces and non-ASCII characters, a download name in quotes, a local
    principal's key and a session's: each signature computed here is S3's."""
    endpoint, _ = front
    bucket = provisioned.artifacts_bucket
    odd = "tenant-a/job-1/1/a b+c (1) été.txt"
    store._s3.put_object(Bucket=bucket, Key=odd, Body=b"odd")
    assert get(store.presign_get(odd, TTL_S, download_name="été report.txt")).content == b"odd"
    principal = _s3_as(endpoint, "pf-function-api", LOCAL_SECRET)
    link = principal.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": odd})
    assert get(link).content == b"odd"
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint,
        region_name=LOCAL_REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    role = f"arn:aws:iam::{LOCAL_ACCOUNT}:role/pagefleet-probe"
    issued = sts.assume_role(RoleArn=role, RoleSessionName="probe")["Credentials"]
    session = _s3_as(
        endpoint, issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"]
    )
    link = session.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": odd})
    assert get(link).content == b"odd"
    assert get(link.replace("X-Amz-Signature=", "X-Amz-Signature=1")).status_code == 403
