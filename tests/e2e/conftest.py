"""One local stack for the whole e2e session: moto, gateway, a worker, the demo site."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pagefleet.client import PagefleetClient
from pagefleet.local.stack import LocalStack


@pytest.fixture(scope="session")
def stack() -> Iterator[LocalStack]:
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    local = LocalStack(api_port=0, workers=1, concurrency=2)
    with local:
        yield local
    local.cleanup_logs()


@pytest.fixture(scope="session")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api
