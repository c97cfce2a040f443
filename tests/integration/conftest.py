"""Integration fixtures: job services on the session's moto server, fresh resources."""

from __future__ import annotations

import pytest

from pagefleet.aws import job_services
from pagefleet.jobs.service import JobServices
from pagefleet.local.provision import Provisioned
from pagefleet.settings import CoreSettings


@pytest.fixture
def svc(provisioned: Provisioned) -> JobServices:
    settings = CoreSettings(
        jobs_table=provisioned.jobs_table,
        tenants_table=provisioned.tenants_table,
        artifacts_bucket=provisioned.artifacts_bucket,
        queue_urls=provisioned.queue_urls,
    )
    return job_services(settings)
