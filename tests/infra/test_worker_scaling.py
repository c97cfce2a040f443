"""The worker pools' scaling policies are the ones in infra/config.py, which
bench/scale_sim.py simulates: the age steps, the cooldowns, the idle scale-in and the start
from zero. That none of them, nor an oldest-age alarm, reads a running job (SQS's in-flight
messages) is a template rule (tests/infra/test_template_rules.py)."""

from __future__ import annotations

from typing import Any

from pagefleet.specs import metrics_names as m


def _step_policies(synth: Any) -> list[dict[str, Any]]:
    return [
        p["StepScalingPolicyConfiguration"]
        for p in synth.props("AWS::ApplicationAutoScaling::ScalingPolicy")
        if p["PolicyType"] == "StepScaling"
    ]


def _metric_names(alarm: dict[str, Any]) -> set[str]:
    names = {alarm["MetricName"]} if "MetricName" in alarm else set()
    for query in alarm.get("Metrics", []):
        if "MetricStat" in query:
            names.add(query["MetricStat"]["Metric"]["MetricName"])
    return names


def _scaling_alarms(synth: Any) -> list[dict[str, Any]]:
    """The alarms that drive a step scaling policy."""
    policies = set(synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy"))
    return [
        a
        for a in synth.props("AWS::CloudWatch::Alarm")
        if any(action.get("Ref") in policies for action in a.get("AlarmActions", []))
    ]


def test_an_idle_pool_is_halved_each_minute_counting_running_jobs_from_the_workers(
    synth,
) -> None:
    pools = synth.stack.config.pools
    idle = [c for c in _step_policies(synth) if c["AdjustmentType"] == "PercentChangeInCapacity"]
    assert len(idle) == sum(1 for p in pools if p.idle_scale_in_percent is not None)
    for config in idle:
        changes = {a["ScalingAdjustment"] for a in config["StepAdjustments"]}
        assert changes == {-p.idle_scale_in_percent for p in pools if p.idle_scale_in_percent}
    alarms = [a for a in _scaling_alarms(synth) if m.SLOTS_BUSY in _metric_names(a)]
    assert len(alarms) == len(idle)
    for alarm in alarms:
        assert alarm["ComparisonOperator"] == "LessThanOrEqualToThreshold"
        assert alarm["EvaluationPeriods"] in {p.idle_minutes for p in pools}
        # Jobs of every priority keep a pool busy: high, normal and low queues all count.
        ids = [q["Id"] for q in alarm["Metrics"]]
        assert sum(i.startswith("visible") for i in ids) == 3
        # Running jobs are the pool's busy slots per task (the worker's own gauge).
        [busy] = [q for q in alarm["Metrics"] if q["Id"] == "busy"]
        stat = busy["MetricStat"]
        assert stat["Stat"] == "Average"
        dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
        assert dims[m.DIM_SERVICE] == m.WORKER_SERVICE
        assert dims[m.DIM_POOL] in synth.stack.config.pool_names


def test_the_age_steps_add_the_configured_tasks(synth) -> None:
    pools = list(synth.stack.config.pools)
    age = [
        c
        for c in _step_policies(synth)
        if c["AdjustmentType"] == "ChangeInCapacity"
        and c["Cooldown"] in {p.step_cooldown_seconds for p in pools}
    ]
    added = sorted(
        sorted(a["ScalingAdjustment"] for a in c["StepAdjustments"] if a["ScalingAdjustment"])
        for c in age
    )
    assert added == sorted(sorted(s.add_tasks for s in p.age_steps) for p in pools)


def test_a_pool_at_zero_starts_a_task_on_its_first_waiting_job(stage_synth) -> None:
    config = stage_synth.stack.config
    at_zero = [pool.name for pool in config.pools if pool.min_tasks == 0]
    alarms = [
        a
        for a in _scaling_alarms(stage_synth)
        if "DesiredTaskCount" in _metric_names(a)
        and "ApproximateNumberOfMessagesVisible" in _metric_names(a)
    ]
    assert len(alarms) == len(at_zero)
    for alarm in alarms:
        # One waiting job is enough, seen in the minute it arrives (Maximum of visible).
        assert alarm["Threshold"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["EvaluationPeriods"] == 1
        visible = [
            q["MetricStat"]
            for q in alarm["Metrics"]
            if "MetricStat" in q
            and q["MetricStat"]["Metric"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
        ]
        assert len(visible) == 3 and {v["Stat"] for v in visible} == {"Maximum"}
        [expression] = [q["Expression"] for q in alarm["Metrics"] if q.get("ReturnData", True)]
        assert "desired" in expression and "< 1" in expression
    starts = [
        c
        for c in _step_policies(stage_synth)
        if c["AdjustmentType"] == "ChangeInCapacity"
        and c["Cooldown"] in {config.pool(n).from_zero_cooldown_seconds for n in at_zero}
    ]
    assert len(starts) == len(at_zero)
    for policy in starts:
        adds = [a["ScalingAdjustment"] for a in policy["StepAdjustments"]]
        assert max(adds) in {config.pool(n).from_zero_tasks for n in at_zero}
