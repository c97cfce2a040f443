"""Shared fixtures: a real moto server on loopback, provisioned from
pagefleet.specs.resources; and how the suites run (tests/support/suites.py)."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from devstack.provision import Provisioned, create_all
from pagefleet.adapters.client_config import VALIDATE_PARAMETERS_ENV
from tests.support.moto_state import MotoState
from tests.support.suites import (
    check_fast_slice,
    check_groups_applied,
    keep_collection_order,
    mark_suites,
    order_for_workers,
)

TESTS_DIR = Path(__file__).resolve().parent

# botocore checks every request against the service model in the suite and in every process
# it starts (local stacks' workers and functions): deployed code leaves that to AWS
# (pagefleet.adapters.client_config), and the embedded AWS might accept a malformed request.
os.environ[VALIDATE_PARAMETERS_ENV] = "1"


def _share_botocore_data() -> None:
    """Fixtures call ``RUNTIME.reset()`` for each test, and the new boto3 session parsed
    botocore's endpoint and service JSON again: ~150 ms of CPU a test. That data is
    read-only, so one loader serves every session of the test process."""
    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


_share_botocore_data()


def _hypothesis_for_ci() -> None:
    """Property tests the same on every run and free of wall-clock limits: Hypothesis's
    defaults fail an example slower than 200 ms (``deadline``) and a slow generator
    (``too_slow``), which a loaded CI machine hits by chance: a flaky test."""
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "pagefleet",
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("pagefleet")


_hypothesis_for_ci()


def pytest_configure(config: pytest.Config) -> None:
    keep_collection_order(config)


# First, so that pytest-xdist's own hook sees the groups when it names the tests.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    check_fast_slice(TESTS_DIR)
    mark_suites(items, TESTS_DIR)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every one sorts alike
        order_for_workers(items, TESTS_DIR)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent with `-p no:xdist`
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """The controller, as each worker reports what it collected."""
    check_groups_applied(node.config, ids)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """One moto server for the session; tests reset its state, not the process."""
    from moto.server import ThreadedMotoServer

    from devstack.embedded_aws import prepare_moto
    from devstack.strict_aws import StrictRules, enforce

    prepare_moto()  # as the local stack does: conditional writes must be atomic
    # AWS's size limits, as in the local stack: a message or item too big for AWS is too big
    # here; transactions take time and meet each other as on AWS. A queue is usable at once
    # (tests make their queues and use them; the settling rule has its own tests).
    # PAGEFLEET_STRICT_AWS_ON=false: moto as it is.
    enforce(StrictRules(queue_settle_s=0))
    # Port 0: the server binds a free port itself (a port chosen first can be taken meanwhile).
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }
    )
    try:
        yield endpoint
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_AWS_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)


def _clear_runtime_caches() -> None:
    """Forget clients and settings built for another endpoint (e.g. a local stack's moto)."""
    from pagefleet.runtime import RUNTIME

    RUNTIME.reset()


def aws_client(service: str) -> Any:
    return boto3.client(service)


def make_resources(moto_endpoint: str) -> Provisioned:
    """Reset moto, then create everything from the shared specs."""
    import urllib.request

    urllib.request.urlopen(
        urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")
    ).read()
    return create_all(
        aws_client("dynamodb"),
        aws_client("sqs"),
        aws_client("s3"),
        scheduler=aws_client("scheduler"),
    )


@pytest.fixture(scope="session")
def provisioned_state(moto_endpoint: str) -> tuple[Provisioned, MotoState]:
    """The shared specs' resources, made once per test process, and moto's state right
    after (tests/support/moto_state.py)."""
    made = make_resources(moto_endpoint)
    state = MotoState.take()
    # Every later test of this process starts from this state: it must hold exactly what
    # create_all made (an earlier test's thread still writing would show here).
    dynamodb, sqs = aws_client("dynamodb"), aws_client("sqs")
    tables = [made.jobs_table, made.tenants_table, made.usage_table, made.connections_table]
    assert sorted(dynamodb.list_tables()["TableNames"]) == sorted(tables)
    assert all(dynamodb.scan(TableName=t, Select="COUNT")["Count"] == 0 for t in tables)
    assert sorted(sqs.list_queues()["QueueUrls"]) == sorted(made.queue_list())
    for url in made.queue_list():
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert counts["ApproximateNumberOfMessages"] == "0", url
        assert counts["ApproximateNumberOfMessagesNotVisible"] == "0", url
    return made, state


@pytest.fixture
def provisioned(provisioned_state: tuple[Provisioned, MotoState]) -> Provisioned:
    """Fresh resources for each test: moto reset, then the provisioned state put back."""
    made, state = provisioned_state
    state.restore()
    _clear_runtime_caches()
    return copy.deepcopy(made)


@pytest.fixture
def api_env(provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Iterator[Provisioned]:
    """Environment for the API and authorizer handlers, as the stack sets it."""
    import json

    monkeypatch.setenv("PAGEFLEET_JOBS_TABLE", provisioned.jobs_table)
    monkeypatch.setenv("PAGEFLEET_TENANTS_TABLE", provisioned.tenants_table)
    monkeypatch.setenv("PAGEFLEET_ARTIFACTS_BUCKET", provisioned.artifacts_bucket)
    monkeypatch.setenv("PAGEFLEET_QUEUE_URLS", json.dumps(provisioned.queue_urls))
    monkeypatch.setenv("PAGEFLEET_USAGE_TABLE", provisioned.usage_table)
    for name, value in provisioned.scheduler_settings().items():
        monkeypatch.setenv(f"PAGEFLEET_{name.upper()}", value)
    _clear_runtime_caches()
    yield provisioned
    _clear_runtime_caches()
