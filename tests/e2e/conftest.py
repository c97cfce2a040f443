"""The local stack of the e2e modules (moto, gateway, a worker, the demo site), stopped
before the next suite so its processes and environment never leak into other tests.

A module that asks for no other configuration shares one stack with every other such
module (``stack``, from ``shared_stack``): tests/support/suites.py puts every test that
uses it in one xdist group, so the stack starts once for them all (a start and a stop cost
~15 s of CPU and 10-25 s) and stops as soon as the next test does not use it. Each module
finds the demo site as a new stack serves it (orders and the watched shop reset). A module
that needs other options overrides ``stack`` with ``yield from running(LocalStack(...))``
and gets a stack of its own.

Every stack checks each AWS call against the synthesized template's policies (its IAM
check is on by default); a module whose run made IAM refuse anything fails at teardown,
naming the principal, the action and the resource: the platform must never need more
than the template grants it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.stack import LocalStack
from pagefleet.client import PagefleetClient
from tests.support.suites import SHARED_STACK_FIXTURE


def _refused(denied: list[dict[str, Any]]) -> str:
    return "IAM refused calls the platform made:\n" + "\n".join(
        f"  {d['principal']}: {d['action']} on {d['resource']} ({d['reason']})" for d in denied
    )


def running(local: LocalStack) -> Iterator[LocalStack]:
    """Start ``local`` for a module's tests, then stop it and drop its logs. A module that
    needs other options overrides ``stack`` with ``yield from running(LocalStack(...))``."""
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with local:
        yield local
        denied = local.iam_report()["denied"] if local.iam.on else []
    local.cleanup_logs()
    assert not denied, _refused(denied)


class _Shared:
    """The one shared stack of this test process: started on first use, stopped when the
    next test does not use it (``pytest_runtest_teardown``), or at the session's end."""

    local: LocalStack | None = None

    @classmethod
    def get(cls) -> LocalStack:
        if cls.local is None:
            os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
            # Every declared pool runs (one small worker for each beyond the standard
            # pool's): a job routed to any pool runs on that pool's worker.
            cls.local = LocalStack(api_port=0, workers=1, concurrency=2, every_pool=True).start()
        return cls.local

    @classmethod
    def stop(cls) -> None:
        local, cls.local = cls.local, None
        if local is not None:
            local.stop()
            local.cleanup_logs()


def _denied(local: LocalStack) -> list[dict[str, Any]]:
    return list(local.iam_report()["denied"]) if local.iam.on else []


@pytest.fixture(scope="module")
def shared_stack() -> Iterator[LocalStack]:
    """The shared stack for one module: the demo site as it starts, and at the module's end
    no IAM refusal that its tests caused."""
    local = _Shared.get()
    assert local.site is not None
    local.site.orders.reset()
    local.site.shop.reset()
    before = len(_denied(local))
    yield local
    denied = _denied(local)[before:]
    assert not denied, _refused(denied)


@pytest.fixture(scope="module")
def stack(shared_stack: LocalStack) -> LocalStack:
    return shared_stack


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the module fixtures are torn down: stop the shared stack unless the next test
    uses it too (with ``--dist loadgroup`` the tests that use it run one after another).

    A next test of the same module keeps it either way: the module's ``shared_stack`` is
    torn down only when the module ends, and it still reads the stack then."""
    try:
        return (yield)
    finally:
        uses = nextitem is not None and (
            SHARED_STACK_FIXTURE in getattr(nextitem, "fixturenames", ())
            or getattr(nextitem, "module", None) is getattr(item, "module", None)
        )
        if not uses:
            _Shared.stop()


def pytest_sessionfinish() -> None:
    _Shared.stop()  # a run interrupted mid-module
