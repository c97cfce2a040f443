"""Alarms that fire, go to the topic, and say what to do: in every stage."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pagefleet.specs import metrics_names as m

from .helpers import logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks.md"
RUNBOOK_LINK = re.compile(r"Runbook: docs/runbooks\.md#([a-z0-9-]+)$")


def _ours(synth) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Every alarm except the step-scaling alarms (their actions are scaling policies)."""
    policies = set(synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy"))
    return {
        k: v["Properties"]
        for k, v in synth.resources("AWS::CloudWatch::Alarm").items()
        if not any(a.get("Ref") in policies for a in v["Properties"].get("AlarmActions", []))
    }


def _uses(alarm: dict[str, Any], text: str) -> bool:
    return text in json.dumps(alarm.get("Metrics", alarm))


def _runbook_anchors() -> set[str]:
    return {
        line[3:].strip() for line in RUNBOOKS.read_text().splitlines() if line.startswith("## ")
    }


def test_every_alarm_notifies_the_topic_and_links_its_runbook(stage_synth) -> None:
    topic = {"Ref": logical_id(stage_synth.stack.alerts.topic)}
    anchors = _runbook_anchors()
    alarms = _ours(stage_synth)
    assert len(alarms) >= 20
    for alarm_id, alarm in alarms.items():
        assert alarm["AlarmActions"] == [topic], alarm_id
        assert alarm["OKActions"] == [topic], alarm_id
        link = RUNBOOK_LINK.search(alarm["AlarmDescription"])
        assert link, (alarm_id, alarm["AlarmDescription"])
        assert link.group(1) in anchors, f"{alarm_id}: no '## {link.group(1)}' in runbooks.md"


def test_each_function_alarms_on_errors_and_throttles(stage_synth) -> None:
    alarms = list(_ours(stage_synth).values())
    for name, function in stage_synth.stack.functions.functions.items():
        ref = {"Name": "FunctionName", "Value": {"Ref": logical_id(function)}}
        for metric in ("Errors", "Throttles"):
            matching = [
                a for a in alarms if a.get("MetricName") == metric and ref in a["Dimensions"]
            ]
            assert len(matching) == 1, (name, metric)


def _dlq_arns_referenced(synth) -> set[str]:  # type: ignore[no-untyped-def]
    """Logical ids of every queue the template names as a dead-letter target anywhere:
    redrive policies, Lambda and EventBridge/Scheduler DeadLetterConfig, async on-failure
    destinations."""
    found: set[str] = set()

    def visit(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                visit(v, k)
        elif isinstance(node, list):
            for v in node:
                visit(v, key)
        if key in ("deadLetterTargetArn", "DeadLetterConfig", "OnFailure") and node:
            found.update(re.findall(r'"Fn::GetAtt": \["(\w+)", "Arn"\]', json.dumps(node)))

    visit(synth.raw["Resources"])
    queues = synth.resources("AWS::SQS::Queue")
    return {q for q in found if q in queues}


def test_every_dead_letter_queue_alarms_on_arrivals(stage_synth) -> None:
    dlqs = _dlq_arns_referenced(stage_synth)
    assert len(dlqs) >= len(stage_synth.stack.queues.all)
    alarms = list(_ours(stage_synth).values())
    for dlq in dlqs:
        name = {"Fn::GetAtt": [dlq, "QueueName"]}
        watching = [a for a in alarms if json.dumps(name) in json.dumps(a.get("Metrics", []))]
        assert len(watching) == 1, dlq
        metrics = {
            q["MetricStat"]["Metric"]["MetricName"]
            for q in watching[0]["Metrics"]
            if "MetricStat" in q
        }
        # Received: the consumer takes a dead letter within seconds, so visible alone
        # would rarely see one.
        assert metrics == {"NumberOfMessagesReceived", "ApproximateNumberOfMessagesVisible"}
        assert watching[0]["Threshold"] == 1


def test_dead_lettered_jobs_alarm_on_the_functions_metric(stage_synth) -> None:
    alarms = [a for a in _ours(stage_synth).values() if a.get("MetricName") == m.DEAD_LETTERED]
    assert len(alarms) == 1
    assert alarms[0]["Namespace"] == m.stage_namespace(stage_synth.stage)
    assert alarms[0]["Dimensions"] == [{"Name": "service", "Value": "pagefleet-dead-letters"}]
    # The function reports under that service name.
    env = stage_synth.raw["Resources"][logical_id(stage_synth.stack.dead_letters.function)][
        "Properties"
    ]["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "pagefleet-dead-letters"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == m.stage_namespace(stage_synth.stage)


def test_worker_pools_alarm_below_desired_and_on_abnormal_stops(stage_synth) -> None:
    alarms = list(_ours(stage_synth).values())
    rules = stage_synth.resources("AWS::Events::Rule")
    for pool in stage_synth.stack.workers.pools.values():
        service_name = {"Fn::GetAtt": [logical_id(pool.service), "Name"]}
        below = [
            a
            for a in alarms
            if _uses(a, "DesiredTaskCount")
            and _uses(a, "RunningTaskCount")
            and json.dumps(service_name) in json.dumps(a["Metrics"])
        ]
        assert len(below) == 1
        stop_rules = [
            rule_id
            for rule_id, rule in rules.items()
            if json.dumps(service_name) in json.dumps(rule["Properties"].get("EventPattern", {}))
        ]
        assert len(stop_rules) == 1
        pattern = rules[stop_rules[0]]["Properties"]["EventPattern"]
        assert pattern["detail"]["lastStatus"] == ["STOPPED"]
        assert "EssentialContainerExited" in json.dumps(pattern)
        assert "ServiceSchedulerInitiated" not in json.dumps(pattern)  # scale-in is normal
        assert rules[stop_rules[0]]["Properties"]["Targets"]  # reasons kept in a log group
        stopping = [
            a
            for a in alarms
            if a.get("MetricName") == "TriggeredRules"
            and a["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": stop_rules[0]}}]
        ]
        assert len(stopping) == 1
        assert stopping[0]["Threshold"] == stage_synth.stack.config.task_stops_alarm_count


def test_tables_alarm_on_throttling(stage_synth) -> None:
    alarms = list(_ours(stage_synth).values())
    store = stage_synth.stack.store
    for table in (store.jobs, store.tenants, store.usage):
        ref = json.dumps({"Name": "TableName", "Value": {"Ref": logical_id(table)}})
        watching = [
            a
            for a in alarms
            if ref in json.dumps(a.get("Metrics", []))
            and _uses(a, "ReadThrottleEvents")
            and _uses(a, "WriteThrottleEvents")
        ]
        assert len(watching) == 1


def test_sweeper_alarms_when_it_stops_running(stage_synth) -> None:
    sweeper = {"Ref": logical_id(stage_synth.stack.sweeper.function)}
    not_running = [
        a
        for a in _ours(stage_synth).values()
        if a.get("MetricName") == "Invocations"
        and a["Dimensions"] == [{"Name": "FunctionName", "Value": sweeper}]
    ]
    assert len(not_running) == 1
    assert not_running[0]["ComparisonOperator"] == "LessThanThreshold"
    # No invocation means no data point: that must count as breaching.
    assert not_running[0]["TreatMissingData"] == "breaching"
    failed = [a for a in _ours(stage_synth).values() if a.get("MetricName") == "FailedInvocations"]
    assert len(failed) == 1


def test_lost_sessions_alarm_on_the_series_every_runtime_counts_into(stage_synth) -> None:
    """The API, the workers' lease watch and the sweeper each count a session they find lost
    under SESSIONS_SERVICE (tests/integration/test_sessions_lost_alarm.py): the alarm reads
    that series, not the API's own."""
    alarms = [a for a in _ours(stage_synth).values() if a.get("MetricName") == m.SESSIONS_LOST]
    assert len(alarms) == 1
    assert alarms[0]["Namespace"] == m.stage_namespace(stage_synth.stage)
    assert alarms[0]["Dimensions"] == [{"Name": "service", "Value": m.SESSIONS_SERVICE}]


def test_leftovers_alarm_on_the_series_every_pass_counts_into(stage_synth) -> None:
    """The sweeper (slots, inboxes) and the live reaper (followers of ended sessions) count
    what they removed under SESSIONS_SERVICE (tests/integration/test_session_leftovers.py):
    one alarm reads that series, and links the runbook saying what to do."""
    alarms = [a for a in _ours(stage_synth).values() if a.get("MetricName") == m.LEFTOVERS_REMOVED]
    assert len(alarms) == 1
    assert alarms[0]["Dimensions"] == [{"Name": "service", "Value": m.SESSIONS_SERVICE}]
    assert alarms[0]["Period"] == 3600 and alarms[0]["Statistic"] == "Sum"
    assert alarms[0]["AlarmDescription"].endswith("Runbook: docs/runbooks.md#leftovers-removed")
