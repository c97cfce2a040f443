"""botocore's client-side parameter validation: off in deployed code (AWS checks
every request on arrival), on in the test suite, the local stack and every process they start."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ParamValidationError
from botocore.stub import Stubber

from pagefleet.adapters.client_config import VALIDATE_PARAMETERS_ENV
from pagefleet.runtime.base import RuntimeBase

# A number where DynamoDB wants a string: AWS refuses it on arrival.
MALFORMED = {"TableName": "jobs", "Key": {"pk": {"S": 5}}}


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def get_item(client: Any) -> Any:
    """The malformed request, answered by a stub in place of AWS if it gets that far."""
    with Stubber(client) as stub:
        stub.add_response("get_item", {}, MALFORMED)
        return client.get_item(**MALFORMED)


def test_a_deployed_runtimes_clients_leave_checking_a_request_to_aws(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(VALIDATE_PARAMETERS_ENV, raising=False)
    client = RuntimeBase().client("dynamodb")
    assert get_item(client) == {}  # sent: no check of its own before it


def test_the_test_suite_checks_every_request_before_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # tests/conftest.py sets it for the suite and the processes it starts.
    monkeypatch.setenv(VALIDATE_PARAMETERS_ENV, "1")
    client = RuntimeBase().client("dynamodb")
    with pytest.raises(ParamValidationError, match=r"Key\.pk\.S"):
        get_item(client)


def test_the_local_stack_checks_every_request_before_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `make run` and the benches start no test suite: the stack's own environment for its
    # processes (and in-process clients) carries the check, since the embedded AWS accepts
    # requests AWS refuses.
    from devstack.constants import aws_env

    monkeypatch.delenv(VALIDATE_PARAMETERS_ENV, raising=False)
    for name, value in aws_env("http://127.0.0.1:1").items():
        monkeypatch.setenv(name, value)
    client = RuntimeBase().client("dynamodb")
    with pytest.raises(ParamValidationError, match=r"Key\.pk\.S"):
        get_item(client)
