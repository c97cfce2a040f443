"""Live runs and notifications in the template: the WebSocket API and its routes, the live
function and its grants, the webhook queue and sender, EventBridge and the secrets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from pagefleet.specs.resources import WEBHOOK_QUEUE

from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def _ref(construct: Any) -> dict[str, str]:
    return {"Ref": logical_id(construct)}


def _statements(synth: Any, function: Any) -> list[dict[str, Any]]:
    role = synth.raw["Resources"][logical_id(function)]["Properties"]["Role"]["Fn::GetAtt"][0]
    out = []
    for policy in synth.props("AWS::IAM::Policy"):
        if {"Ref": role} in policy["Roles"]:
            out += policy["PolicyDocument"]["Statement"]
    return out


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return actions if isinstance(actions, list) else [actions]


def test_the_websocket_api_routes_every_action_to_the_live_function(synth) -> None:
    live = synth.stack.live
    api = _ref(live.api)
    by_id = synth.resources("AWS::ApiGatewayV2::Route")
    routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in by_id.values()}
    assert set(routes) == {
        "$connect",
        "$disconnect",
        "subscribe",
        "unsubscribe",
        "watch",
        "unwatch",
        "ping",
        "$default",
    }
    assert all(r["ApiId"] == api for r in routes.values())
    (integration,) = synth.props("AWS::ApiGatewayV2::Integration")
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert logical_id(live.function) in json.dumps(integration["IntegrationUri"])
    answered = {
        by_id[r["RouteId"]["Ref"]]["Properties"]["RouteKey"]
        for r in synth.props("AWS::ApiGatewayV2::RouteResponse")
    }
    assert answered == {"subscribe", "unsubscribe", "watch", "unwatch", "ping", "$default"}
    synth.template.has_resource_properties(
        "AWS::ApiGatewayV2::Api",
        {"ProtocolType": "WEBSOCKET", "RouteSelectionExpression": "$request.body.action"},
    )
    (stage,) = synth.props("AWS::ApiGatewayV2::Stage")
    assert stage["StageName"] == "live" and stage["AutoDeploy"] is True
    assert stage["AccessLogSettings"]["DestinationArn"]
    assert stage["DefaultRouteSettings"]["LoggingLevel"] == "ERROR"
    assert stage["DefaultRouteSettings"]["DataTraceEnabled"] is False
    assert "LiveUrl" in synth.raw["Outputs"]


def test_the_live_function_settings_and_idle_reaper(synth) -> None:
    live = synth.stack.live
    env = synth.raw["Resources"][logical_id(live.function)]["Properties"]["Environment"]
    variables = env["Variables"]
    assert variables["PAGEFLEET_CONNECTIONS_TABLE"] == _ref(live.connections)
    # The management endpoint is the stage's callback URL (https://<api>.execute-api.../live).
    assert "execute-api" in json.dumps(variables["PAGEFLEET_LIVE_ENDPOINT"])
    reaper = synth.raw["Resources"][logical_id(live.reaper)]["Properties"]
    assert reaper["ScheduleExpression"] == "rate(1 minute)"
    assert logical_id(live.function) in json.dumps(reaper["Targets"])


def test_posting_to_connections_is_granted_on_this_stage_only(synth) -> None:
    live = synth.stack.live
    for function in (live.function, synth.stack.job_changes.function):
        manage = [
            s
            for s in _statements(synth, function)
            if "execute-api:ManageConnections" in _actions(s)
        ]
        assert len(manage) == 1, function
        resource = json.dumps(manage[0]["Resource"])
        assert logical_id(live.api) in resource and "/live/*/@connections/*" in resource
    api_statements = _statements(synth, synth.stack.api.handler)
    assert not [s for s in api_statements if "execute-api:ManageConnections" in _actions(s)]


def test_workers_post_live_view_frames_and_may_do_nothing_else_with_connections(synth) -> None:
    live = synth.stack.live
    for pool in synth.stack.workers.pools.values():
        role = logical_id(pool.task_definition.task_role)
        statements = [
            s
            for policy in synth.props("AWS::IAM::Policy")
            if {"Ref": role} in policy["Roles"]
            for s in policy["PolicyDocument"]["Statement"]
        ]
        manage = [s for s in statements if "execute-api:ManageConnections" in _actions(s)]
        assert len(manage) == 1, pool.name
        resource = json.dumps(manage[0]["Resource"])
        assert logical_id(live.api) in resource and "/live/POST/@connections/*" in resource
        task = synth.raw["Resources"][logical_id(pool.task_definition)]["Properties"]
        env = {
            e["Name"]: e["Value"]
            for c in task["ContainerDefinitions"]
            for e in c.get("Environment", [])
        }
        assert "execute-api" in json.dumps(env["PAGEFLEET_LIVE_ENDPOINT"])


def test_the_stream_reader_and_the_api_know_the_live_and_notification_parts(synth) -> None:
    resources = synth.raw["Resources"]
    changes = resources[logical_id(synth.stack.job_changes.function)]["Properties"]
    variables = changes["Environment"]["Variables"]
    assert variables["PAGEFLEET_CONNECTIONS_TABLE"] == _ref(synth.stack.live.connections)
    assert variables["PAGEFLEET_WEBHOOK_QUEUE_URL"] == _ref(synth.stack.notifications.queue)
    assert variables["PAGEFLEET_EVENT_BUS_NAME"] == "default"
    api = resources[logical_id(synth.stack.api.handler)]["Properties"]["Environment"]["Variables"]
    assert api["PAGEFLEET_CONNECTIONS_TABLE"] == _ref(synth.stack.live.connections)
    assert "wss://" in json.dumps(api["PAGEFLEET_LIVE_URL"])
    put_events = [
        s
        for s in _statements(synth, synth.stack.job_changes.function)
        if "events:PutEvents" in _actions(s)
    ]
    assert len(put_events) == 1 and ":event-bus/default" in json.dumps(put_events[0]["Resource"])


def test_webhooks_have_their_queue_dlq_sender_and_alarm(synth) -> None:
    notifications = synth.stack.notifications
    queue = synth.raw["Resources"][logical_id(notifications.queue)]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == WEBHOOK_QUEUE.max_receive_count
    assert queue["VisibilityTimeout"] == WEBHOOK_QUEUE.visibility_timeout_s
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [logical_id(notifications.queue), "Arn"]},
            "FunctionName": _ref(notifications.function),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )
    dlq = json.dumps({"Fn::GetAtt": [logical_id(notifications.dlq), "QueueName"]})
    alarms = [a for a in synth.props("AWS::CloudWatch::Alarm") if dlq in json.dumps(a)]
    assert len(alarms) == 1 and alarms[0]["AlarmActions"]
    sender = _statements(synth, notifications.function)
    assert any("sqs:ChangeMessageVisibility" in _actions(s) for s in sender)


def test_signing_secrets_are_scoped_to_their_own_prefix(synth) -> None:
    for function, allowed in (
        (
            synth.stack.notifications.function,
            {"secretsmanager:GetSecretValue", "secretsmanager:CreateSecret"},
        ),
        (
            synth.stack.api.handler,
            {
                "secretsmanager:GetSecretValue",
                "secretsmanager:CreateSecret",
                "secretsmanager:PutSecretValue",
            },
        ),
    ):
        secrets = [
            s
            for s in _statements(synth, function)
            if any(a.startswith("secretsmanager:") for a in _actions(s))
        ]
        assert len(secrets) == 1
        assert set(_actions(secrets[0])) == allowed
        resource = json.dumps(secrets[0]["Resource"])
        assert "secret:pagefleet-webhooks/dev/*" in resource
    # The worker reads tenants' {{secrets.NAME}} (pagefleet/<stage>/...), never these.
    assert "pagefleet-webhooks" not in json.dumps(synth.props("AWS::ECS::TaskDefinition"))


def test_the_connections_table_alarms_on_throttling(synth) -> None:
    ref = json.dumps({"Name": "TableName", "Value": _ref(synth.stack.live.connections)})
    alarms = [
        a for a in synth.props("AWS::CloudWatch::Alarm") if ref in json.dumps(a.get("Metrics", []))
    ]
    assert len(alarms) == 1 and "dynamodb-throttles" in alarms[0]["AlarmDescription"]
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "TableName": Match.absent(),
        },
    )


def test_the_designed_delays_stay_within_the_promises(synth) -> None:
    """A status reaches followers within ~1 s and a webhook within ~2 s of the final write:
    the stream batching window is 1 s and the webhook queue adds none."""
    mappings = {m["FunctionName"]["Ref"]: m for m in synth.props("AWS::Lambda::EventSourceMapping")}
    stream = mappings[logical_id(synth.stack.job_changes.function)]
    assert stream["MaximumBatchingWindowInSeconds"] <= 1
    webhooks = mappings[logical_id(synth.stack.notifications.function)]
    assert webhooks.get("MaximumBatchingWindowInSeconds", 0) == 0


def test_the_stream_reader_reads_and_writes_a_batchs_marks_together(synth) -> None:
    jobs = json.dumps({"Fn::GetAtt": [logical_id(synth.stack.store.jobs), "Arn"]})
    on_jobs = [
        a
        for s in _statements(synth, synth.stack.job_changes.function)
        if jobs in json.dumps(s["Resource"])
        for a in _actions(s)
    ]
    assert {"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"} <= set(on_jobs)
