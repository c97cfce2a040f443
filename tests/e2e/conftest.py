"""One local stack per e2e module (moto, gateway, a worker, the demo site), stopped before
the next suite so its processes and environment never leak into other tests.

Every stack checks each AWS call against the synthesized template's policies (its IAM
check is on by default); a module whose run made IAM refuse anything fails at teardown,
naming the principal, the action and the resource: the platform must never need more
than the template grants it."""

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
        denied = local.iam_report()["denied"] if local.iam.on else []
    local.cleanup_logs()
    assert not denied, "IAM refused calls the platform made:\n" + "\n".join(
        f"  {d['principal']}: {d['action']} on {d['resource']} ({d['reason']})" for d in denied
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    yield from running(LocalStack(api_port=0, workers=1, concurrency=2))


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api
