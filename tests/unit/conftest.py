"""Unit fixtures: job services on the in-memory fakes, sharing one fake clock."""

from __future__ import annotations

import pytest

from devstack.fakes import FakeClock, FakeQueue, fake_services
from pagefleet.jobs.service import JobServices


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def svc(clock: FakeClock) -> JobServices:
    return fake_services(clock)


@pytest.fixture
def queue(svc: JobServices) -> FakeQueue:
    assert isinstance(svc.queue, FakeQueue)
    return svc.queue
