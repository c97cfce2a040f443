"""The contract suite: every test runs against the in-memory fake and the AWS adapter.

A fake that drifts from the adapter it stands in for would make the fast lifecycle tests
prove nothing; these tests are what keeps the two the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from devstack.fakes import FakeClock, fake_services
from devstack.provision import Provisioned
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import CoreSettings


@pytest.fixture(params=["fake", "aws"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def svc(backend: str, request: pytest.FixtureRequest) -> JobServices:
    """Job services on the fakes, or on the moto-backed AWS adapters (real boto3 calls)."""
    if backend == "fake":
        return fake_services(FakeClock(time.time()))
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    settings = CoreSettings(
        jobs_table=provisioned.jobs_table,
        tenants_table=provisioned.tenants_table,
        artifacts_bucket=provisioned.artifacts_bucket,
        queue_urls=provisioned.queue_urls,
    )
    return RUNTIME.job_services(settings)


@pytest.fixture
def wait(backend: str, svc: JobServices) -> Callable[[float], None]:
    """Let time pass: the fake clock moves; real SQS needs real seconds."""

    def _wait(seconds: float) -> None:
        if backend == "fake":
            assert isinstance(svc.clock, FakeClock)
            svc.clock.advance(seconds)
        else:
            time.sleep(seconds)

    return _wait
