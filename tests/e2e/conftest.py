"""One local stack per e2e module (moto, gateway, a worker, the demo site), stopped before
the next suite so its processes and environment never leak into other tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from devstack.stack import LocalStack
from pagefleet.client import PagefleetClient


def running(local: LocalStack) -> Iterator[LocalStack]:
    """Start ``local`` for a module's tests, then stop it and drop its logs. A module that
    needs other options overrides ``stack`` with ``yield from running(LocalStack(...))``."""
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with local:
        yield local
    local.cleanup_logs()


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    yield from running(LocalStack(api_port=0, workers=1, concurrency=2))


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api
