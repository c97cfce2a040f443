"""A job's tenant stores outlive their first credentials: the embedded AWS's expiring STS
(devstack.sts_lifetime, in front of a real moto server) refuses a session key past its
expiration as AWS does, and the worker's job-role credentials renew themselves before it.
The clock is the test's, on both sides, so an expiry is met without waiting for one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from browser_task.tenant.access import RoleRefresher, TenantAccess, refresh_windows
from devstack.constants import LOCAL_REGION
from devstack.provision import Provisioned
from devstack.sts_lifetime import CredentialLifetimes
from devstack.tenant_role import create_job_role
from pagefleet.specs.settings import WorkerSettings
from tests.support.fronts import Clock, served_behind

LIFETIME_S = 300.0
TENANT = "tenant-a"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def expiring(moto_endpoint: str, clock: Clock) -> Iterator[tuple[str, CredentialLifetimes]]:
    """This process's moto backends (the session's server) behind expiring credentials."""
    with served_behind(
        lambda app: CredentialLifetimes(app, lifetime_s=LIFETIME_S, clock=clock)
    ) as served:
        yield served


def client_as(endpoint: str, key: str, service: str, *, validate: bool = True) -> Any:
    session = boto3.session.Session(
        aws_access_key_id=key, aws_secret_access_key="x", region_name=LOCAL_REGION
    )
    config = Config(parameter_validation=validate)
    return session.client(service, endpoint_url=endpoint, config=config)  # type: ignore[call-overload]


@pytest.fixture
def access(
    expiring: tuple[str, CredentialLifetimes],
    provisioned: Provisioned,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> TenantAccess:
    endpoint, _ = expiring
    settings = WorkerSettings(
        **provisioned.store_settings(),
        stage="local",
        job_role_arn=create_job_role(boto3.client("iam")),
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # the tenant stores' clients
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    # The worker's own identity is a role (its task's): its AssumeRole is role chaining.
    sts = client_as(endpoint, "worker-task-role", "sts")
    return TenantAccess(settings, session_ttl_s=lambda _: 3600, sts=sts, clock=clock)


def upload(data: Any, name: str) -> None:
    data.artifacts.put(
        tenant_id=TENANT, job_id="job-1", attempt=1, name=name, data=b"x", content_type="text/plain"
    )


def test_a_tenants_stores_keep_uploading_past_their_first_credentials_expiry(
    access: TenantAccess, expiring: tuple[str, CredentialLifetimes], clock: Clock
) -> None:
    """A job holds its TenantData for its whole run: credentials taken once at its start
    are refused once they expire (AWS: ExpiredToken), and the artifacts are lost."""
    _, front = expiring
    data = access(TENANT)
    upload(data, "first.txt")
    clock.now += LIFETIME_S + 1  # the first session is over
    upload(data, "after-expiry.txt")
    assert access.assumed == 2
    assert front.refused == []
    assert front.issued == 2
    clock.now += 3 * LIFETIME_S  # and again, with the same stores
    upload(data, "much-later.txt")
    assert access.assumed == 3
    assert access(TENANT) is data  # kept for the tenant: its credentials renew themselves


def test_credentials_of_minutes_are_not_taken_again_for_every_call(
    access: TenantAccess, clock: Clock
) -> None:
    """botocore's default windows (renew 15 min before expiry, every caller waits within
    10 min) would re-assume the role before each call on credentials of 5 minutes."""
    data = access(TENANT)
    advisory, mandatory = refresh_windows(LIFETIME_S)
    for index in range(5):
        upload(data, f"early-{index}.txt")
        clock.now += (LIFETIME_S - advisory - 1) / 5
    assert access.assumed == 1
    clock.now += advisory  # now inside the mandatory window
    upload(data, "late.txt")
    assert access.assumed == 2
    assert mandatory < advisory


def test_refresh_windows_are_botocores_at_an_hour_and_scale_below_it() -> None:
    assert refresh_windows(3600) == (900, 600)  # botocore's own defaults
    assert refresh_windows(43200) == (900, 600)
    assert refresh_windows(900) == (225, 150)  # AssumeRole's shortest
    assert refresh_windows(30) == (7, 5)


def test_an_expired_session_key_is_refused_in_each_services_shape(
    expiring: tuple[str, CredentialLifetimes], provisioned: Provisioned, clock: Clock
) -> None:
    endpoint, front = expiring
    sts = client_as(endpoint, "worker-task-role", "sts")
    role = create_job_role(boto3.client("iam"))
    issued = sts.assume_role(RoleArn=role, RoleSessionName="job", DurationSeconds=3600)
    credentials = issued["Credentials"]
    # The answer says what the local stack gives, not the hour asked for.
    assert credentials["Expiration"].timestamp() == pytest.approx(clock.now + LIFETIME_S, abs=1)
    session = boto3.session.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=LOCAL_REGION,
    )
    s3 = session.client("s3", endpoint_url=endpoint)
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    s3.head_bucket(Bucket=provisioned.artifacts_bucket)  # valid until its expiration
    clock.now += LIFETIME_S
    with pytest.raises(ClientError) as refused_s3:
        s3.put_object(Bucket=provisioned.artifacts_bucket, Key="k", Body=b"x")
    assert refused_s3.value.response["Error"]["Code"] == "ExpiredToken"
    assert refused_s3.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as refused_ddb:
        dynamodb.describe_table(TableName=provisioned.jobs_table)
    assert refused_ddb.value.response["Error"]["Code"] == "ExpiredTokenException"
    assert "expired" in refused_ddb.value.response["Error"]["Message"]
    assert [r["service"] for r in front.refused] == ["s3", "dynamodb"]


def test_assume_role_durations_are_checked_as_aws_checks_them(
    expiring: tuple[str, CredentialLifetimes], provisioned: Provisioned
) -> None:
    endpoint, _ = expiring
    role = create_job_role(boto3.client("iam"))
    # botocore checks the 900 s minimum itself; the service must too (other SDKs, the CLI).
    chained = client_as(endpoint, "worker-task-role", "sts", validate=False)
    with pytest.raises(ClientError, match="greater than or equal to 900"):
        chained.assume_role(RoleArn=role, RoleSessionName="job", DurationSeconds=899)
    with pytest.raises(ClientError, match="1 hour session limit"):
        chained.assume_role(RoleArn=role, RoleSessionName="job", DurationSeconds=3601)
    # The operator's own key is no role session: longer is for the role's maximum to say.
    operator = client_as(endpoint, "testing", "sts")
    operator.assume_role(RoleArn=role, RoleSessionName="job", DurationSeconds=7200)


def test_assume_role_session_names_and_tags_are_checked_as_aws_checks_them(
    moto_endpoint: str, expiring: tuple[str, CredentialLifetimes]
) -> None:
    endpoint, _ = expiring
    role = create_job_role(boto3.client("iam"))
    # botocore checks none of these patterns or maximums (only a name's 2 characters).
    sts = client_as(endpoint, "worker-task-role", "sts", validate=False)
    lenient = client_as(moto_endpoint, "worker-task-role", "sts", validate=False)
    refused = {
        "a name of another script": {"RoleSessionName": "tenant-café"},
        "a name with a space": {"RoleSessionName": "tenant a"},
        "a name of 65": {"RoleSessionName": "t" * 65},
        "a tag value of 257": {"Tags": [{"Key": "tenant", "Value": "v" * 257}]},
        "a tag key of 129": {"Tags": [{"Key": "k" * 129, "Value": "v"}]},
        "a tag key with '#'": {"Tags": [{"Key": "tenant#1", "Value": "v"}]},
        "51 tags": {"Tags": [{"Key": f"k{i}", "Value": "v"} for i in range(51)]},
    }
    for what, asked in refused.items():
        call = {"RoleArn": role, "RoleSessionName": "job", **asked}
        with pytest.raises(ClientError) as caught:
            sts.assume_role(**call)
        assert caught.value.response["Error"]["Code"] == "ValidationError", what
        assert "failed to satisfy constraint" in caught.value.response["Error"]["Message"], what
        if what != "a name of 65":  # moto's one check
            lenient.assume_role(**call)  # what the rule is there for: moto takes it
    # Letters of any script and spaces are a tag value's characters; 50 tags, 256 a value.
    tags = [{"Key": f"k{i}", "Value": "Zoë 東京"} for i in range(49)]
    tags.append({"Key": "tenant", "Value": "v" * 256})
    sts.assume_role(RoleArn=role, RoleSessionName="tenant-" + "a" * 57, Tags=tags)


def test_a_job_role_for_any_tenant_the_api_takes_is_assumed_as_aws_would(
    expiring: tuple[str, CredentialLifetimes], provisioned: Provisioned, clock: Clock
) -> None:
    """The longest tenant id the API and the CLI take: its session name (cut to 64) and
    its tag pass AWS's checks."""
    endpoint, _ = expiring
    role = create_job_role(boto3.client("iam"))
    sts = client_as(endpoint, "worker-task-role", "sts", validate=False)
    for tenant in ("t", "a" * 128, "Acme_Corp-7" * 11):
        refresher = RoleRefresher(sts, role, tenant, clock=clock, on_assumed=lambda: None)
        assert refresher()["access_key"]
