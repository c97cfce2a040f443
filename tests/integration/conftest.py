"""Integration fixtures: job services on the session's moto server, fresh resources."""

from __future__ import annotations

import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import CoreSettings
from tests.support.api import ApiCaller, caller


@pytest.fixture(autouse=True)
def _no_dns_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Webhook URLs are checked after a DNS lookup: in tests, only ``localhost`` and names
    under example.com resolve (``devstack.fakes.no_lookups``), so no query ever leaves the
    machine, e.g. for the fuzzer's generated host names."""
    from devstack.fakes import no_lookups
    from pagefleet.targets import egress_policy

    monkeypatch.setattr(egress_policy, "system_lookup", no_lookups)


@pytest.fixture
def svc(provisioned: Provisioned) -> JobServices:
    settings = CoreSettings(
        jobs_table=provisioned.jobs_table,
        tenants_table=provisioned.tenants_table,
        artifacts_bucket=provisioned.artifacts_bucket,
        queue_urls=provisioned.queue_urls,
    )
    return RUNTIME.job_services(settings)


@pytest.fixture
def alice(api_env: Provisioned) -> ApiCaller:
    return caller(api_env, "alice")


@pytest.fixture
def bob(api_env: Provisioned) -> ApiCaller:
    return caller(api_env, "bob")
