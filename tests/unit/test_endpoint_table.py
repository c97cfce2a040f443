"""botocore's endpoint table, holding only the services we call
(``pagefleet.adapters.endpoint_table``): botocore's answers are the whole table's, for every
service, and a process that calls only our services never reads the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import botocore
import botocore.session
import pytest
from botocore.regions import EndpointResolver

from pagefleet.adapters.client_config import SharedLoader
from pagefleet.adapters.endpoint_table import ENDPOINT_PREFIXES, services_we_call

ROOT = Path(__file__).resolve().parents[2]
TABLE = Path(botocore.__file__).parent / "data" / "endpoints.json"


def _whole() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


class Reads:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> dict[str, Any]:
        self.count += 1
        return _whole()


def test_every_service_in_every_partition_resolves_as_with_the_whole_table() -> None:
    whole = EndpointResolver(_whole(), uses_builtin_data=True)
    reads = Reads()
    cut = EndpointResolver(services_we_call(_whole(), reads), uses_builtin_data=True)
    compared = 0
    for partition in _whole()["partitions"]:
        name = partition["partition"]
        regions = list(partition["regions"])[:3]
        for service in partition["services"]:
            assert cut.get_service_endpoints_data(service, name) == (
                whole.get_service_endpoints_data(service, name)
            )
            assert cut.get_available_endpoints(service, name, allow_non_regional=True) == (
                whole.get_available_endpoints(service, name, allow_non_regional=True)
            )
            for region in regions:
                assert cut.construct_endpoint(service, region, partition_name=name) == (
                    whole.construct_endpoint(service, region, partition_name=name)
                ), (service, region)
                compared += 1
    assert compared > 1000
    assert reads.count == 1  # the rest read once, at the first service not kept


def test_a_kept_service_is_answered_without_reading_the_rest() -> None:
    reads = Reads()
    table = services_we_call(_whole(), reads)
    cut = EndpointResolver(table, uses_builtin_data=True)
    listed = _whole()["partitions"][0]["services"]
    for prefix in ENDPOINT_PREFIXES:
        assert cut.construct_endpoint(prefix, "eu-west-1") is not None
        # Kept where the table has it; one it lacks (execute-api) known absent.
        assert (prefix in table["partitions"][0]["services"]) == (prefix in listed)
    assert reads.count == 0
    # An unknown service: the whole table is read to say so, and it is not there.
    assert cut.construct_endpoint("no-such-service", "eu-west-1")["hostname"] == (
        "no-such-service.eu-west-1.amazonaws.com"
    )
    assert reads.count == 1


# The services production code makes clients of: client("x"), aws("x"), clients("x").
_CLIENT_CALL = re.compile(r"""\b(?:client|clients|aws)\(\s*["']([a-z0-9-]+)["']""")


def _services_called() -> set[str]:
    found: set[str] = set()
    for top in ("pagefleet", "functions", "browser_task", "devstack"):
        for path in (ROOT / top).rglob("*.py"):
            found |= set(_CLIENT_CALL.findall(path.read_text()))
    return found


def test_every_service_our_code_calls_is_kept() -> None:
    session = botocore.session.get_session()
    called = _services_called()
    assert {"dynamodb", "sqs", "s3", "secretsmanager", "apigatewaymanagementapi"} <= called
    # Operators' and tests' helpers (IAM, quotas) may read the whole table: not kept.
    runtime = called - {"iam", "service-quotas"}
    prefixes = {session.get_service_model(name).endpoint_prefix for name in runtime}
    assert prefixes <= ENDPOINT_PREFIXES, prefixes - ENDPOINT_PREFIXES


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
def test_our_clients_are_made_without_reading_the_whole_table(region: str) -> None:
    session, plain = botocore.session.get_session(), botocore.session.get_session()
    session.register_component("data_loader", SharedLoader({}))
    for name in ("dynamodb", "sqs", "s3", "secretsmanager", "scheduler", "sts", "events"):
        made, expected = (
            s.create_client(
                name, region_name=region, aws_access_key_id="x", aws_secret_access_key="x"
            )
            for s in (session, plain)
        )
        # Where the client sends its requests: as a client over the whole table would.
        assert made.meta.endpoint_url == expected.meta.endpoint_url
        assert made.meta.region_name == expected.meta.region_name == region
    services = session._get_internal_component("endpoint_resolver")._endpoint_data["partitions"][0][
        "services"
    ]
    assert services._whole._services is None  # the other ~300 services never read
