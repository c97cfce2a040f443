"""A deployment's own settings (pagefleet.deploy.json) are read on every synth, so a later
command cannot drop them; prod warns at synth when its alarms would reach nobody; who owns
API Gateway's account setting is the deployment's choice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra.config import STAGES
from infra.deploy_file import load_config

from .conftest import EXAMPLE_DEPLOY_FILE, REPO_ROOT

pytestmark = pytest.mark.infra

ALARM_WARNING = "pagefleet:alarmsNotifyNobody"


def config_of(context: dict[str, Any]) -> Any:
    return load_config(App(context=context).node)


def test_the_deploy_file_is_read_on_every_synth_and_a_one_off_override_keeps_it(
    tmp_path: Path,
) -> None:
    deploy_file = tmp_path / "pagefleet.deploy.json"
    deploy_file.write_text(
        json.dumps(
            {"prod": {"alarm_email": "ops@example.com", "pools": {"heavy": {"max_tasks": 4}}}}
        )
    )
    base = {"pagefleet:stage": "prod", "pagefleet:deployFile": str(deploy_file)}
    config = config_of(base)
    assert config.alarm_email == "ops@example.com"
    assert config.pool("heavy").max_tasks == 4
    assert config.pool("heavy").cpu == STAGES["prod"].pool("heavy").cpu  # merged, not replaced
    # The restore runbook's switch, as a later command: the e-mail is still there.
    restored = config_of(
        {**base, "pagefleet:overrides": '{"restored_tables": {"JobsTable": "jobs-restored"}}'}
    )
    assert restored.alarm_email == "ops@example.com"
    assert restored.restored_tables == {"JobsTable": "jobs-restored"}
    # Other stages are untouched; no file: the stage's own defaults.
    assert config_of({**base, "pagefleet:stage": "dev"}).alarm_email is None
    missing = {**base, "pagefleet:deployFile": str(tmp_path / "none.json")}
    assert config_of(missing) == STAGES["prod"]


def test_pools_are_a_list_merged_by_name_and_a_new_name_is_a_new_pool(tmp_path: Path) -> None:
    deploy_file = tmp_path / "pagefleet.deploy.json"
    pdf = {"name": "pdf", "cpu": 1024, "memory_mib": 3072, "concurrency": 1}
    pdf |= {"min_tasks": 0, "max_tasks": 3, "isolation": "task"}
    deploy_file.write_text(
        json.dumps({"prod": {"pools": [{"name": "heavy", "max_tasks": 6}, pdf]}})
    )
    config = config_of({"pagefleet:stage": "prod", "pagefleet:deployFile": str(deploy_file)})
    # The stage's pools first, kept (none is dropped by leaving it out), then the new one.
    assert config.pool_names == ("standard", "heavy", "pdf")
    assert config.pool("heavy").max_tasks == 6
    assert config.pool("heavy").memory_mib == STAGES["prod"].pool("heavy").memory_mib
    assert config.pool("standard") == STAGES["prod"].pool("standard")
    offers = {o["name"]: o for o in json.loads(config.pool_offers())}
    assert offers["pdf"]["isolation"] == "task" and offers["pdf"]["slots"] == 1
    deploy_file.write_text(json.dumps({"prod": {"pools": [{"max_tasks": 6}]}}))
    with pytest.raises(ValueError, match='each of "pools" needs a "name"'):
        config_of({"pagefleet:stage": "prod", "pagefleet:deployFile": str(deploy_file)})


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"prod": {"alarm_emial": "x@example.com"}}', "alarm_emial"),
        ('{"staging": {}}', "unknown stages ['staging']"),
        ('{"prod": ', "not JSON"),
    ],
)
def test_a_wrong_deploy_file_stops_the_synth_naming_what_is_wrong(
    tmp_path: Path, content: str, says: str
) -> None:
    deploy_file = tmp_path / "pagefleet.deploy.json"
    deploy_file.write_text(content)
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        config_of({"pagefleet:stage": "prod", "pagefleet:deployFile": str(deploy_file)})


def test_the_example_deploy_file_is_valid_for_every_stage_it_names() -> None:
    example = json.loads((REPO_ROOT / EXAMPLE_DEPLOY_FILE).read_text())
    assert set(example) <= set(STAGES) and example["prod"]["alarm_email"]
    for stage in example:
        config_of({"pagefleet:stage": stage, "pagefleet:deployFile": EXAMPLE_DEPLOY_FILE})
    ignored = (REPO_ROOT / ".gitignore").read_text().splitlines()
    assert "pagefleet.deploy.json" in ignored


def warnings_of(stack: Any) -> list[str]:
    return [
        str(entry.data)
        for construct in stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:warning"
    ]


@pytest.mark.slow
def test_prod_warns_at_synth_when_its_alarms_would_notify_nobody(synths) -> None:
    from infra.app import build_app

    assert (
        STAGES["prod"].alarm_subscriber_required and STAGES["ap-south-1"].alarm_subscriber_required
    )
    _, bare = build_app(
        context={
            "pagefleet:stage": "prod",
            "pagefleet:deployFile": "no-such-deploy-file.json",
            "pagefleet:bundleDependencies": False,
            "pagefleet:inspectOnly": True,
        }
    )
    assert any(ALARM_WARNING in w and "alarm_email" in w for w in warnings_of(bare))
    # With the documented deploy file (an e-mail), and in dev (nobody required), no warning.
    assert not any(ALARM_WARNING in w for w in warnings_of(synths.get("prod").stack))
    assert not any(ALARM_WARNING in w for w in warnings_of(synths.get("dev").stack))


def test_api_stages_log_through_a_role_set_elsewhere_when_the_stack_does_not_own_it() -> None:
    """``api_gateway_account: existing``: no AWS::ApiGateway::Account (it would overwrite the
    owner's setting), and the stages keep their logging, created without waiting for it."""
    from aws_cdk import Stack
    from aws_cdk import aws_apigatewayv2 as apigwv2
    from aws_cdk.assertions import Template

    from infra.constructs.api_account import ApiGatewayAccount

    templates = {}
    for choice in ("stack", "existing"):
        stack = Stack(App(), "s")
        config = STAGES["dev"].model_copy(update={"api_gateway_account": choice})
        account = ApiGatewayAccount(stack, "Account", config=config)
        api = apigwv2.WebSocketApi(stack, "Ws")
        stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
        cfn = stage.node.default_child
        assert isinstance(cfn, apigwv2.CfnStage)
        cfn.default_route_settings = apigwv2.CfnStage.RouteSettingsProperty(logging_level="ERROR")
        account.logs_through(stage)
        templates[choice] = Template.from_stack(stack).to_json()["Resources"]
    owned = {k: v for k, v in templates["stack"].items() if v["Type"] == "AWS::ApiGateway::Account"}
    (account_id,) = owned
    (stage,) = [v for v in templates["stack"].values() if v["Type"] == "AWS::ApiGatewayV2::Stage"]
    assert account_id in stage["DependsOn"]
    assert not [
        v for v in templates["existing"].values() if v["Type"] == "AWS::ApiGateway::Account"
    ]
    (stage,) = [
        v for v in templates["existing"].values() if v["Type"] == "AWS::ApiGatewayV2::Stage"
    ]
    assert stage["Properties"]["DefaultRouteSettings"]["LoggingLevel"] == "ERROR"
    assert "DependsOn" not in stage
