"""botocore's client-side parameter validation: off in deployed code (AWS checks
every request on arrival), on in the test suite, the local stack and every process they start.
And botocore's data: loaded once per process, without the models' documentation."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ParamValidationError
from botocore.loaders import Loader
from botocore.stub import Stubber

from browser_task.tenant.access import TenantAccess
from pagefleet.adapters.client_config import VALIDATE_PARAMETERS_ENV, SharedLoader, aws_session
from pagefleet.runtime.base import RuntimeBase
from pagefleet.specs.settings import WorkerSettings

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


# --- botocore's data, loaded once per process ----------------------------------------------
SERVICES = ("s3", "dynamodb", "sqs", "secretsmanager", "sts")


def test_every_session_of_ours_reads_botocore_data_once_per_process() -> None:
    """A worker with a job role makes a session per tenant; each used to parse the endpoint
    table and its service models again (~14 MB for S3 and DynamoDB), kept by its clients."""
    first, second = botocore.session.get_session(), botocore.session.get_session()
    a = aws_session(first).client("s3")
    b = aws_session(second).client("s3")
    assert a.meta.service_model._service_description is b.meta.service_model._service_description
    endpoints = [s.get_component("data_loader").load_data("endpoints") for s in (first, second)]
    assert endpoints[0] is endpoints[1]


def test_a_tenants_clients_share_the_models_the_worker_loaded() -> None:
    made: dict[tuple[str, str], Any] = {}
    sts = FakeSts()
    access = TenantAccess(
        WorkerSettings(
            jobs_table="j",
            tenants_table="t",
            artifacts_bucket="b",
            queue_urls={"p": "q"},
            job_role_arn="arn:aws:iam::000000000000:role/job",
        ),
        session_ttl_s=lambda _: 3600,
        sts=sts,
        on_client=lambda tenant, service, client: made.setdefault((tenant, service), client),
    )
    access("tenant-a"), access("tenant-b")
    for service in ("s3", "dynamodb"):
        one, other = (made[(t, service)].meta.service_model for t in ("tenant-a", "tenant-b"))
        assert one._service_description is other._service_description
    assert sts.assumed == ["tenant-a", "tenant-b"]  # each tenant still has its own identity


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_model_is_botocores_less_its_documentation(service: str) -> None:
    """Every operation, shape and member botocore loads, in its order; only the texts
    that help() shows are gone."""
    stock = Loader().load_service_model(service, "service-2")
    # Loaded into a cache of its own: the process's models are changed in place by
    # botocore's own handlers as clients use them (S3's first call takes `/{Bucket}` out of
    # its operations' URIs), in the shared cache as in a session's own.
    ours = SharedLoader({}).load_service_model(service, "service-2")
    same = json.dumps(ours) == json.dumps(without_documentation(stock))
    # Not the strings themselves: a failing compare of two 1 MB texts takes pytest ~40 s.
    assert same, f"{service}: ours is not botocore's model less its documentation"
    assert "documentation" in json.dumps(stock)  # there was something to drop


def test_what_botocore_reads_of_a_models_documentation_is_kept() -> None:
    model = aws_session().client("s3").meta.service_model
    params = {p.name: p.documentation for p in model.client_context_parameters}
    assert params["Accelerate"]  # S3's client context parameters document themselves


def without_documentation(model: dict[str, Any]) -> dict[str, Any]:
    model = copy.deepcopy(model)
    model.pop("documentation", None)
    for operation in model["operations"].values():
        operation.pop("documentation", None)
    for shape in model["shapes"].values():
        shape.pop("documentation", None)
        for member in shape.get("members", {}).values():
            member.pop("documentation", None)
    return model


class FakeSts:
    """AssumeRole as STS answers it, recording whose."""

    def __init__(self) -> None:
        self.assumed: list[str] = []

    def assume_role(self, **kwargs: Any) -> dict[str, Any]:
        tenant = kwargs["Tags"][0]["Value"]
        self.assumed.append(tenant)
        return {
            "Credentials": {
                "AccessKeyId": f"key-{tenant}",
                "SecretAccessKey": "secret",
                "SessionToken": "token",
                "Expiration": datetime.now(UTC) + timedelta(hours=1),
            },
            "AssumedRoleUser": {"Arn": f"arn:aws:sts::000000000000:assumed-role/job/{tenant}"},
        }
