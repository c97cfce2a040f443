"""Lambda factory, runtime settings in the environment, and the REST API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk.assertions import Match

from pagefleet.api.errors import ErrorBody
from pagefleet.specs.gateway import GATEWAY_RESPONSES, PUBLIC_ROUTES
from pagefleet.specs.settings import (
    ApiSettings,
    AuthorizerSettings,
    ChangesSettings,
    CoreSettings,
    LiveSettings,
    WebhookSettings,
    WorkerSettings,
    env_names,
)

from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

SETTINGS_BY_HANDLER = {
    "functions.api.handler.handler": ApiSettings,
    "functions.authorizer.handler.handler": AuthorizerSettings,
    "functions.dead_letters.handler.handler": CoreSettings,
    "functions.sweeper.handler.handler": CoreSettings,
    "functions.job_changes.handler.handler": ChangesSettings,
    "functions.live.handler.handler": LiveSettings,
    "functions.webhooks.handler.handler": WebhookSettings,
}


def _required(settings_cls) -> set[str]:  # type: ignore[no-untyped-def]
    prefix = settings_cls.model_config["env_prefix"]
    return {f"{prefix}{n}".upper() for n, f in settings_cls.model_fields.items() if f.is_required()}


def _check_env(env: dict[str, object], settings_cls) -> None:  # type: ignore[no-untyped-def]
    names = {k for k in env if k.startswith("PAGEFLEET_")}
    assert names <= env_names(settings_cls), names - env_names(settings_cls)
    assert _required(settings_cls) <= names, _required(settings_cls) - names


def test_every_function_sets_exactly_its_settings(synth) -> None:
    functions = synth.props("AWS::Lambda::Function")
    ours = [f for f in functions if f.get("Handler") in SETTINGS_BY_HANDLER]
    assert {f["Handler"] for f in ours} == set(SETTINGS_BY_HANDLER)
    for function in ours:
        _check_env(function["Environment"]["Variables"], SETTINGS_BY_HANDLER[function["Handler"]])


def test_every_worker_task_sets_exactly_its_settings(synth) -> None:
    for task in synth.props("AWS::ECS::TaskDefinition"):
        worker = next(c for c in task["ContainerDefinitions"] if c["Name"] == "Worker")
        env = {e["Name"]: e["Value"] for e in worker["Environment"]}
        # ECS puts a secret's value (a proxy pool's proxy) into a setting when a task starts.
        env.update({e["Name"]: e["ValueFrom"] for e in worker.get("Secrets", [])})
        _check_env(env, WorkerSettings)
        assert env["PAGEFLEET_POOL"] in synth.stack.config.pool_names


def test_queue_urls_are_json_by_queue_key(synth) -> None:
    api = synth.stack.api.handler
    env = synth.raw["Resources"][logical_id(api)]["Properties"]["Environment"]["Variables"]
    rendered = json.dumps(env["PAGEFLEET_QUEUE_URLS"])
    for q in synth.stack.queues.all:
        assert logical_id(q.queue) in rendered
        assert f'\\"{q.key}\\"' in rendered  # standard, standard-high, heavy-low...


def test_functions_share_one_factory_profile(synth) -> None:
    functions = [
        f for f in synth.props("AWS::Lambda::Function") if f.get("Handler") in SETTINGS_BY_HANDLER
    ]
    roles = set()
    for f in functions:
        assert f["Runtime"] == "python3.14"
        assert f["Architectures"] == ["arm64"]
        assert f["TracingConfig"] == {"Mode": "Active"}
        assert f["LoggingConfig"]["LogFormat"] == "JSON"
        assert "LogGroup" in f["LoggingConfig"]
        assert len(f["Layers"]) == 1
        roles.add(json.dumps(f["Role"]))
    assert len(roles) == len(functions)  # one role per function
    retention = synth.stack.config.log_retention_days
    for group in synth.props("AWS::Logs::LogGroup"):
        assert group["RetentionInDays"] == retention


def test_background_functions_are_wired(synth) -> None:
    dead_letters = synth.stack.dead_letters.function
    for pool in synth.stack.queues.all:
        synth.template.has_resource_properties(
            "AWS::Lambda::EventSourceMapping",
            {
                "EventSourceArn": {"Fn::GetAtt": [logical_id(pool.dlq), "Arn"]},
                "FunctionName": {"Ref": logical_id(dead_letters)},
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
            },
        )
    synth.template.has_resource_properties(
        "AWS::Events::Rule", {"ScheduleExpression": "rate(1 minute)", "State": "ENABLED"}
    )
    synth.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": logical_id(synth.stack.sweeper.function)},
            "MaximumRetryAttempts": 0,
        },
    )


def test_code_asset_holds_only_runtime_code(synth) -> None:
    function = synth.raw["Resources"][logical_id(synth.stack.api.handler)]
    asset = synth.outdir / function["Metadata"]["aws:asset:path"]
    files = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    assert "pagefleet/specs/settings.py" in files
    assert any(f.startswith("functions/api/") for f in files)
    tops = {f.split("/")[0] for f in files}
    assert tops <= {"pagefleet", "functions"}, tops
    assert not any("__pycache__" in f or f.startswith("devstack/") for f in files)


def test_rest_api_with_authorizer_throttling_and_access_logs(synth) -> None:
    api = synth.stack.api
    # SnapStart: API Gateway invokes the authorizer's alias (tests/infra/test_snapstart.py).
    authorizer_fn = logical_id(synth.stack.functions.alias("authorizer"))
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {
            "Type": "TOKEN",
            "IdentitySource": "method.request.header.Authorization",
        },
    )
    authorizers = synth.resources("AWS::ApiGateway::Authorizer")
    assert len(authorizers) == 1
    assert authorizer_fn in json.dumps(next(iter(authorizers.values()))["Properties"])
    methods = synth.props("AWS::ApiGateway::Method")
    keyed = [m for m in methods if m["HttpMethod"] == "ANY"]
    assert keyed and all(m["AuthorizationType"] == "CUSTOM" for m in keyed)
    config = synth.stack.config
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "TracingEnabled": True,
            "AccessLogSetting": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp(r"\$context\.authorizer\.tenant_id"),
            },
            "MethodSettings": Match.array_with(
                [
                    Match.object_like(
                        {
                            "ThrottlingRateLimit": config.api_throttle_rate,
                            "ThrottlingBurstLimit": config.api_throttle_burst,
                        }
                    )
                ]
            ),
        },
    )
    env = synth.raw["Resources"][logical_id(api.handler)]["Properties"]["Environment"]
    assert env["Variables"]["PAGEFLEET_MAX_REQUEST_BYTES"] == str(config.max_request_bytes)


def test_dockerfile_pins_playwright_to_the_lock() -> None:
    root = Path(__file__).resolve().parents[2]
    lock = (root / "uv.lock").read_text()
    block = lock.split('name = "playwright"\nversion = "', 1)[1]
    version = block.split('"', 1)[0]
    dockerfile = (root / "browser_task/Dockerfile").read_text()
    assert f"ARG PLAYWRIGHT_VERSION={version}\n" in dockerfile
    assert "mcr.microsoft.com/playwright/python:v${PLAYWRIGHT_VERSION}-noble" in dockerfile
    assert "\nUSER pwuser\n" in dockerfile


def test_only_the_public_routes_answer_without_a_key(synth) -> None:
    resources = synth.resources("AWS::ApiGateway::Resource")
    by_id = {k: r["Properties"]["PathPart"] for k, r in resources.items()}
    open_methods = {
        (m["HttpMethod"], "/" + by_id[m["ResourceId"]["Ref"]])
        for m in synth.props("AWS::ApiGateway::Method")
        if m["AuthorizationType"] != "CUSTOM"
    }
    assert open_methods == set(PUBLIC_ROUTES)
    for method in synth.props("AWS::ApiGateway::Method"):
        if method["AuthorizationType"] != "CUSTOM":
            assert method["AuthorizationType"] == "NONE" and "AuthorizerId" not in method
            assert method["Integration"]["Type"] == "AWS_PROXY"


def test_the_stack_says_which_release_it_deploys(stage_synth) -> None:
    import pagefleet

    assert stage_synth.raw["Outputs"]["Version"]["Value"] == pagefleet.__version__


def test_api_gateways_own_errors_carry_the_apis_error_shape(synth) -> None:
    answers = {r["ResponseType"]: r for r in synth.props("AWS::ApiGateway::GatewayResponse")}
    assert {"UNAUTHORIZED", "ACCESS_DENIED", "DEFAULT_4XX", "DEFAULT_5XX"} <= set(answers)
    for response in GATEWAY_RESPONSES:
        answer = answers[response.type]
        template = answer["ResponseTemplates"]["application/json"]
        # What API Gateway renders: $context.error.messageString is the quoted message.
        body = json.loads(template.replace("$context.error.messageString", '"Unauthorized"'))
        ErrorBody.model_validate(body)
        assert body["error"]["code"] == response.code
        if response.status is not None:
            assert answer["StatusCode"] == str(response.status)
