"""Unit fixtures: job services on the in-memory fakes, sharing one fake clock."""

from __future__ import annotations

import pytest

from pagefleet.jobs.service import JobServices
from tests.fakes import FakeClock, FakeQueue, fake_services


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
