"""The worker pools' scaling policies are the ones in infra/config.py, which
bench/scale_sim.py simulates: the age steps, the cooldowns and the idle scale-in."""

from __future__ import annotations

from typing import Any


def _step_policies(synth: Any) -> list[dict[str, Any]]:
    return [
        p["StepScalingPolicyConfiguration"]
        for p in synth.props("AWS::ApplicationAutoScaling::ScalingPolicy")
        if p["PolicyType"] == "StepScaling"
    ]


def test_an_idle_pool_is_halved_each_minute(synth) -> None:
    pools = synth.stack.config.pools.values()
    idle = [c for c in _step_policies(synth) if c["AdjustmentType"] == "PercentChangeInCapacity"]
    assert len(idle) == sum(1 for p in pools if p.idle_scale_in_percent is not None)
    for config in idle:
        changes = {a["ScalingAdjustment"] for a in config["StepAdjustments"]}
        assert changes == {-p.idle_scale_in_percent for p in pools if p.idle_scale_in_percent}
    alarms = [
        a
        for a in synth.props("AWS::CloudWatch::Alarm")
        if any("inflight" in m.get("Id", "") for m in a.get("Metrics", []))
    ]
    assert len(alarms) == len(idle)
    for alarm in alarms:
        assert alarm["ComparisonOperator"] == "LessThanOrEqualToThreshold"
        assert alarm["EvaluationPeriods"] in {p.idle_minutes for p in pools}
        # Jobs of every priority keep a pool busy: high, normal and low queues all count.
        ids = [m["Id"] for m in alarm["Metrics"]]
        assert sum(i.startswith("inflight") for i in ids) == 3
        assert sum(i.startswith("visible") for i in ids) == 3


def test_the_age_steps_add_the_configured_tasks(synth) -> None:
    pools = list(synth.stack.config.pools.values())
    age = [c for c in _step_policies(synth) if c["AdjustmentType"] == "ChangeInCapacity"]
    added = sorted(
        sorted(a["ScalingAdjustment"] for a in c["StepAdjustments"] if a["ScalingAdjustment"])
        for c in age
    )
    assert added == sorted(sorted(s.add_tasks for s in p.age_steps) for p in pools)
    assert {c["Cooldown"] for c in age} == {p.step_cooldown_seconds for p in pools}
