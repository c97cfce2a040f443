"""Lambda takes 4 KB of environment a function, measured as the JSON object it is sent:
every synth checks each function's at its largest once deployed (infra/function_env.py).

Before, nothing did, and the local stack's functions take any size: the declared-pools
stage of ``tests/infra/test_declared_pools.py`` (five pools) gave its API function an
environment of ~4,260 bytes once resolved in us-east-1 (fifteen whole queue URLs as JSON in
JSON), which CloudFormation would have refused half way through a deploy. Functions now get
each queue by name beside one URL prefix, and pool offers without their defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infra.function_env import (
    LAMBDA_ENV_MAX_BYTES,
    EnvironmentSizeCheck,
    environment_bytes,
    oversized,
)
from pagefleet.specs.settings import CoreSettings

from .conftest import Synth
from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

STACK = "pagefleet-prod"


def _queue(n: int) -> dict[str, Any]:
    return {f"JobQueuesPool{n}Jobs1234ABCD": {"Type": "AWS::SQS::Queue", "Properties": {}}}


def test_a_reference_counts_at_the_longest_value_it_can_resolve_to() -> None:
    resources = {
        **_queue(1),
        "Named": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "q"}},
    }
    generated = len(STACK) + 1 + len("JobQueuesPool1Jobs1234ABCD") + 1 + 13
    url = len("https://sqs.") + 15 + len(".amazonaws.com.cn/") + 12 + 1 + generated
    assert environment_bytes({"A": {"Ref": "JobQueuesPool1Jobs1234ABCD"}}, resources, STACK) == (
        len('{"A":""}') + url
    )
    by_name = {"A": {"Fn::GetAtt": ["JobQueuesPool1Jobs1234ABCD", "QueueName"]}}
    assert environment_bytes(by_name, resources, STACK) == len('{"A":""}') + generated
    assert environment_bytes({"A": {"Ref": "Named"}}, resources, STACK) == len('{"A":""}') + (
        url - generated + 1
    )
    # JSON in JSON: each quote of a value costs an escape, as Lambda measures it.
    quoted = {"A": {"Fn::Join": ["", ['{"k":"', {"Ref": "AWS::Region"}, '"}']]}}
    assert environment_bytes(quoted, resources, STACK) == len(
        json.dumps({"A": '{"k":"' + "x" * 15 + '"}'}, separators=(",", ":"))
    )


def test_an_environment_lambda_would_refuse_fails_the_synth_naming_the_function(
    tmp_path: Path,
) -> None:
    resources: dict[str, Any] = {}
    for n in range(40):
        resources.update(_queue(n))
    urls = ["{"]
    for n, queue in enumerate(resources):
        urls += [f'"pool{n}":"', {"Ref": queue}, '",']
    variables = {"PAGEFLEET_QUEUE_URLS": {"Fn::Join": ["", [*urls, "}"]]}, "PAGEFLEET_STAGE": "p"}
    resources["FunctionsApi45DE0CE2"] = {
        "Type": "AWS::Lambda::Function",
        "Properties": {"Environment": {"Variables": variables}},
    }
    template = {"Resources": resources}
    found = oversized(template, STACK)
    assert list(found) == ["FunctionsApi45DE0CE2"]
    size, heaviest = found["FunctionsApi45DE0CE2"]
    assert size > LAMBDA_ENV_MAX_BYTES and heaviest[0].startswith("PAGEFLEET_QUEUE_URLS")
    path = tmp_path / f"{STACK}.template.json"
    path.write_text(json.dumps(template))
    report = EnvironmentSizeCheck().validate(SimpleNamespace(template_paths=[str(path)]))  # type: ignore[arg-type]
    assert not report.success
    [violation] = report.violations
    assert violation.violating_resources[0].resource_logical_id == "FunctionsApi45DE0CE2"
    assert "PAGEFLEET_QUEUE_URLS" in violation.description and str(size) in violation.description


def test_every_stages_functions_fit_with_queues_by_name(stage_synth: Synth) -> None:
    """The stages as documented (the declared-pools test holds five pools to it too)."""
    assert oversized(stage_synth.raw, stage_synth.stack.stack_name) == {}
    api = stage_synth.raw["Resources"][logical_id(stage_synth.stack.api.handler)]
    variables = api["Properties"]["Environment"]["Variables"]
    rendered = json.dumps(variables["PAGEFLEET_QUEUE_URLS"])
    assert "QueueName" in rendered and '"Ref"' not in rendered
    assert "https://sqs." in json.dumps(variables["PAGEFLEET_QUEUE_URL_PREFIX"])
    # A task's environment has no such bound: the workers keep whole URLs.
    task = next(iter(stage_synth.resources("AWS::ECS::TaskDefinition").values()))
    worker = next(c for c in task["Properties"]["ContainerDefinitions"] if c["Name"] == "Worker")
    env = {e["Name"]: e["Value"] for e in worker["Environment"]}
    assert '"Ref"' in json.dumps(env["PAGEFLEET_QUEUE_URLS"])
    assert "PAGEFLEET_QUEUE_URL_PREFIX" not in env


def test_queues_by_name_become_whole_urls_with_the_prefix() -> None:
    base = {"jobs_table": "j", "tenants_table": "t", "artifacts_bucket": "b"}
    prefix = "https://sqs.us-east-1.amazonaws.com/123456789012/"
    settings = CoreSettings(
        **base,
        queue_url_prefix=prefix,
        queue_urls={"standard": "pagefleet-prod-Standard-AB12", "heavy": "http://127.0.0.1:9/q"},
    )
    assert settings.queue_url("standard") == prefix + "pagefleet-prod-Standard-AB12"
    assert settings.queue_url("heavy") == "http://127.0.0.1:9/q"  # a whole URL stays
    # No prefix (the local stack, the tests' placeholders): values are taken as given.
    assert CoreSettings(**base, queue_urls={"standard": "-"}).queue_url("standard") == "-"
