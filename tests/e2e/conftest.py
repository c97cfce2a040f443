"""One local stack per e2e module (moto, gateway, a worker, the demo site), stopped before
the next suite so its processes and environment never leak into other tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from devstack.stack import LocalStack
from pagefleet.client import PagefleetClient


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    local = LocalStack(api_port=0, workers=1, concurrency=2)
    with local:
        yield local
    local.cleanup_logs()


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api
