"""The local IAM check in front of a real moto server, with the synthesized template's policies:
cross-tenant probes through the worker's own path, S3's 403 for a missing key, the job
role's trust policy, and refusals in each service's own error shape."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from browser_task.tenant.access import TenantAccess
from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
from devstack.iam.book import Book, access_key
from devstack.iam.calls import Account
from devstack.iam.guard import Checker, IamGuard
from devstack.iam.probes import cross_tenant_probes, summary
from devstack.iam.synth import synthesized
from devstack.provision import Provisioned
from devstack.tenant_role import create_job_role
from pagefleet.specs.settings import WorkerSettings

pytestmark = pytest.mark.slow  # the first run synthesizes the CDK app (kept afterwards)

ACCOUNT = Account(LOCAL_REGION, LOCAL_ACCOUNT)


@pytest.fixture(scope="module")
def synth_data() -> dict[str, Any]:
    return json.loads(synthesized().read_text())


@pytest.fixture(scope="module")
def guarded(moto_endpoint: str, synth_data: dict[str, Any]) -> Iterator[tuple[str, IamGuard]]:
    """moto's application (this process's backends, as the session's server) behind the
    IAM check, on its own port."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    guard = IamGuard(
        DomainDispatcherApplication(create_backend_app),
        Checker(Book.from_synth(synth_data, ACCOUNT)),
    )
    server = make_server("127.0.0.1", 0, guard, threaded=True)
    port = server.server_port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", guard
    finally:
        server.shutdown()


def as_principal(endpoint: str, principal: str, service: str) -> Any:
    session = boto3.session.Session(
        aws_access_key_id=access_key(principal), aws_secret_access_key="x", region_name=LOCAL_REGION
    )
    return session.client(service, endpoint_url=endpoint)  # type: ignore[call-overload]


@pytest.fixture
def worker_settings(provisioned: Provisioned) -> WorkerSettings:
    return WorkerSettings(
        **provisioned.store_settings(),
        stage="local",
        job_role_arn=create_job_role(boto3.client("iam")),
    )


@pytest.fixture
def on_guard(guarded: tuple[str, IamGuard], monkeypatch: pytest.MonkeyPatch) -> IamGuard:
    """Tenant stores (built from the environment's endpoint) talk to the guarded front."""
    endpoint, guard = guarded
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    guard.checker.denied.clear()
    return guard


def tenant_data(endpoint: str, settings: WorkerSettings, tenant: str) -> Any:
    sts = as_principal(endpoint, "worker/standard", "sts")
    return TenantAccess(settings, session_ttl_s=lambda _: 3600, sts=sts)(tenant)


def test_tenant_a_reaches_none_of_tenant_bs_data(
    guarded: tuple[str, IamGuard], on_guard: IamGuard, worker_settings: WorkerSettings
) -> None:
    endpoint, _ = guarded
    probes = cross_tenant_probes(
        worker_settings,
        as_principal(endpoint, "worker/standard", "sts"),
        lambda service: boto3.client(service),
        worker_client=lambda service: as_principal(endpoint, "worker/standard", service),
    )
    wrong = [p for p in probes if not p.as_expected]
    assert not wrong, "\n".join(f"{p.name}: {p.detail}" for p in wrong)
    reaching = [p for p in probes if not p.own]
    assert len(reaching) >= 9
    assert summary(probes) == f"iam: cross-tenant probes {len(reaching)} of {len(reaching)} denied"
    # Each refusal was IAM's, logged with the principal, the action and the resource.
    denied = {(d.principal, d.action) for d in on_guard.checker.denied}
    assert ("job-role (tenant=probe-a)", "s3:PutObject") in denied
    assert (
        "job-role (tenant=probe-a)",
        "dynamodb:PutItem",
    ) in denied  # the usage transaction's first item
    assert ("job-role (tenant=probe-a)", "secretsmanager:GetSecretValue") in denied
    # A session's commands: another tenant's refused to the job role, the tenant's own to
    # the task role (issue 32 finding 9: they were every tenant's to both).
    assert [p.name for p in probes if "session commands" in p.name and not p.as_expected] == []
    assert ("worker/standard", "dynamodb:Query") in denied


def test_a_session_never_saved_is_missing_not_refused(
    guarded: tuple[str, IamGuard], on_guard: IamGuard, worker_settings: WorkerSettings
) -> None:
    endpoint, _ = guarded
    sessions = tenant_data(endpoint, worker_settings, "a").sessions
    assert asyncio.run(sessions.load("a", "never-saved")) is None
    assert on_guard.checker.denied == []


def test_without_the_listing_grant_the_missing_session_is_a_403(
    guarded: tuple[str, IamGuard],
    on_guard: IamGuard,
    worker_settings: WorkerSettings,
    synth_data: dict[str, Any],
) -> None:
    """The template as it was before item 2's fix: a test that fails if the grant goes."""
    endpoint, guard = guarded
    without = copy.deepcopy(synth_data)
    for resource in without["template"]["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy":
            document = resource["Properties"]["PolicyDocument"]
            document["Statement"] = [
                s for s in document["Statement"] if s.get("Sid") != "TenantListing"
            ]
    full = guard.checker
    guard.checker = Checker(Book.from_synth(without, ACCOUNT))
    try:
        sessions = tenant_data(endpoint, worker_settings, "a").sessions
        with pytest.raises(ClientError) as refused:
            asyncio.run(sessions.load("a", "never-saved"))
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    finally:
        guard.checker = full


def test_the_job_role_is_assumed_only_by_a_worker_with_only_the_tenant_tag(
    guarded: tuple[str, IamGuard], on_guard: IamGuard, worker_settings: WorkerSettings
) -> None:
    endpoint, _ = guarded
    role = worker_settings.job_role_arn
    worker = as_principal(endpoint, "worker/standard", "sts")
    worker.assume_role(
        RoleArn=role, RoleSessionName="tenant-a", Tags=[{"Key": "tenant", "Value": "a"}]
    )
    refusals = [
        (worker, []),  # no tenant tag
        (worker, [{"Key": "tenant", "Value": "a"}, {"Key": "admin", "Value": "yes"}]),
        (as_principal(endpoint, "function/api", "sts"), [{"Key": "tenant", "Value": "a"}]),
    ]
    for client, tags in refusals:
        with pytest.raises(ClientError) as refused:
            client.assume_role(RoleArn=role, RoleSessionName="tenant-a", Tags=tags)
        assert refused.value.response["Error"]["Code"] == "AccessDenied"


def test_a_refusal_is_the_services_own_access_denied_naming_what_was_refused(
    guarded: tuple[str, IamGuard], on_guard: IamGuard, provisioned: Provisioned
) -> None:
    endpoint, _ = guarded
    authorizer = as_principal(endpoint, "function/authorizer", "dynamodb")
    with pytest.raises(ClientError) as refused:
        authorizer.put_item(
            TableName=provisioned.jobs_table, Item={"pk": {"S": "x"}, "sk": {"S": "y"}}
        )
    error = refused.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert "dynamodb:PutItem" in error["Message"]
    assert "table/pagefleet-jobs" in error["Message"]
    assert "assumed-role/pagefleet-authorizer-function" in error["Message"]

    sqs = as_principal(endpoint, "function/authorizer", "sqs")
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=provisioned.queue_urls["standard"], MessageBody="{}")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"

    s3 = as_principal(endpoint, "function/live", "s3")
    with pytest.raises(ClientError) as refused:
        s3.get_object(Bucket=provisioned.artifacts_bucket, Key="a/x")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert [(d.principal, d.action) for d in on_guard.checker.denied] == [
        ("function/authorizer", "dynamodb:PutItem"),
        ("function/authorizer", "sqs:SendMessage"),
        ("function/live", "s3:GetObject"),
    ]


def test_an_unknown_access_key_is_refused(
    guarded: tuple[str, IamGuard], on_guard: IamGuard
) -> None:
    endpoint, _ = guarded
    session = boto3.session.Session(
        aws_access_key_id="AKIANOBODY", aws_secret_access_key="x", region_name=LOCAL_REGION
    )
    with pytest.raises(ClientError) as refused:
        session.client("s3", endpoint_url=endpoint).list_buckets()
    assert refused.value.response["Error"]["Code"] == "InvalidClientTokenId"
