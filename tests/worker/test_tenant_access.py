"""The worker reaches a job's secrets, sessions, artifacts and usage only through credentials
of the job role tagged with the job's tenant (real Chromium, moto: AssumeRole works there,
IAM is not enforced, so the test watches which credentials every call used)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from browser_task.__main__ import build_worker
from browser_task.tenant.access import TenantAccess
from devstack.provision import Provisioned
from devstack.tenant_role import create_job_role
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings
from tests.worker.conftest import TENANT, RunningWorker, Site, wait_for_job

OTHER = "tenant-b"
# What only a tenant's own credentials may do.
TENANT_DATA_CALLS = {"PutObject", "GetObject", "GetSecretValue", "TransactWriteItems"}


class Watch:
    """Every data call of interest, with the tenant whose credentials made it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (whose, operation, params)

    def hook(self, whose: str) -> Callable[..., None]:
        def before(params: dict[str, Any], model: Any, **_: Any) -> None:
            if model.name in TENANT_DATA_CALLS:
                self.calls.append((whose, model.name, dict(params)))

        return before

    def on_client(self, tenant: str, service: str, client: Any) -> None:
        client.meta.events.register("before-parameter-build.*.*", self.hook(tenant))

    def by(self, whose: str) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for who, operation, params in self.calls:
            if who == whose:
                out[operation].append(params)
        return out


@pytest.fixture
def role_settings(make_settings: Callable[..., WorkerSettings], resources: Provisioned) -> Any:
    return make_settings(
        job_role_arn=create_job_role(boto3.client("iam"), prefix="w-"),
        usage_table=resources.usage_table,
        stage="test",
    )


def workflow(site: Site) -> JobRequest:
    page = site.add(
        "/login",
        "<html><body><h1>Login</h1><input id='pw'>"
        "<script>document.cookie='sid=1; path=/'</script></body></html>",
    )
    return JobRequest.model_validate(
        {
            "name": "login",
            "steps": [
                {"action": "goto", "url": page},
                {"action": "fill", "selector": "#pw", "value": "{{secrets.PW}}"},
                {"action": "save_session", "name": "shop"},
                {"action": "screenshot", "name": "page.png"},
            ],
        }
    )


def test_every_tenant_data_call_goes_through_that_tenants_role(
    role_settings: WorkerSettings, site: Site
) -> None:
    secrets = boto3.client("secretsmanager")
    for tenant in (TENANT, OTHER):
        secrets.create_secret(Name=f"pagefleet/test/{tenant}/PW", SecretString=f"pw-{tenant}")
    watch = Watch()
    # The worker's own clients must never be used for a tenant's data.
    for service in ("s3", "secretsmanager", "dynamodb"):
        RUNTIME.client(service).meta.events.register(
            "before-parameter-build.*.*", watch.hook("worker")
        )
    services: JobServices = RUNTIME.job_services(role_settings)
    limits = RUNTIME.tenancy(role_settings).limits
    access = TenantAccess(
        role_settings, session_ttl_s=lambda t: limits(t).session_s, on_client=watch.on_client
    )
    running = RunningWorker(build_worker(role_settings, tenant_data=access)).start()
    try:
        jobs = [
            (tenant, submit_job(services, tenant, workflow(site)).job.job_id)
            for tenant in (TENANT, TENANT, OTHER)
        ]
        for tenant, job_id in jobs:
            done = wait_for_job_of(services, tenant, job_id)
            assert done.status is JobStatus.SUCCEEDED, done.error
    finally:
        running.stop()

    assert watch.by("worker") == {}, "the worker's own credentials touched tenant data"
    assert access.assumed == 2  # once per tenant: the credentials are kept for their life
    for tenant in (TENANT, OTHER):
        assert access(tenant).identity is not None
        assert access(tenant).identity.endswith(f"/tenant-{tenant}")
        calls = watch.by(tenant)
        put_keys = [p["Key"] for p in calls["PutObject"]]
        assert put_keys and all(k.startswith(f"{tenant}/") for k in put_keys), put_keys
        assert f"{tenant}/sessions/shop.json" in put_keys
        assert [p["SecretId"] for p in calls["GetSecretValue"]] == [
            f"pagefleet/test/{tenant}/PW"
        ] * (2 if tenant == TENANT else 1)
        usage_keys = [
            item["Update"]["Key"]["pk"]["S"]
            for p in calls["TransactWriteItems"]
            for item in p["TransactItems"]
            if "Update" in item
        ]
        assert usage_keys and set(usage_keys) == {f"TENANT#{tenant}"}


def wait_for_job_of(services: JobServices, tenant: str, job_id: str) -> Any:
    if tenant == TENANT:
        return wait_for_job(services, job_id)
    import time

    deadline = time.monotonic() + 60
    while True:
        job = services.store.get(tenant, job_id)
        if job.status.is_final or time.monotonic() > deadline:
            return job
        time.sleep(0.05)
