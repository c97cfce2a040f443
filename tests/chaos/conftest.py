"""One local stack per chaos module: moto, gateway, two workers on a short lease, and a
target site (``ChaosSite``) that hangs, answers 503 or is slow when told to.

A module may set ``WORKER_ENV`` / ``LAMBDA_ENV`` (dicts) to start its workers / its Lambda
functions with more settings, e.g. AWS fault injection, and ``SWEEPER_INTERVAL_S`` (5 by
default).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from devstack.chaos import ChaosSite, chaos_worker_env, record_store
from devstack.stack import LocalStack
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.client import PagefleetClient


@pytest.fixture(scope="module")
def site() -> Iterator[ChaosSite]:
    chaos_site = ChaosSite().start()
    yield chaos_site
    chaos_site.stop()


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[LocalStack]:
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    extra = getattr(request.module, "WORKER_ENV", {})
    # The workers' temporary files, Chromium's profiles among them, go to a directory of
    # this module's: a worker killed with SIGKILL cannot remove its own. Short, because
    # Chromium puts a Unix socket under it.
    tmp = tempfile.mkdtemp(prefix="pf-chaos-", dir="/tmp")
    local = LocalStack(
        api_port=0,
        workers=2,
        concurrency=2,
        # The sweeper's backstops (lost retries, dead leases) run often enough to matter here.
        sweeper_interval_s=getattr(request.module, "SWEEPER_INTERVAL_S", 5),
        worker_env=chaos_worker_env(TMPDIR=tmp, **extra),
        lambda_env=getattr(request.module, "LAMBDA_ENV", {}),
    )
    failed_before = request.session.testsfailed
    try:
        with local:
            yield local
        if request.session.testsfailed == failed_before:
            local.cleanup_logs()
        else:
            # A chaos failure is rarely reproduced on demand: its stack's logs (workers,
            # functions, the embedded AWS) stay for whoever looks into it.
            print(f"\nchaos stack logs kept (a test of the module failed): {local.log_dir}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api


@pytest.fixture(scope="module")
def store(stack: LocalStack) -> DynamoJobStore:
    return record_store(stack)
