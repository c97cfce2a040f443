"""Integration fixtures: job services on the session's moto server, fresh resources."""

from __future__ import annotations

import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.settings import CoreSettings


@pytest.fixture
def svc(provisioned: Provisioned) -> JobServices:
    settings = CoreSettings(
        jobs_table=provisioned.jobs_table,
        tenants_table=provisioned.tenants_table,
        artifacts_bucket=provisioned.artifacts_bucket,
        queue_urls=provisioned.queue_urls,
    )
    return RUNTIME.job_services(settings)
