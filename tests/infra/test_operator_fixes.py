"""Issue 35's operator fixes that a stage's settings decide, checked without a synth."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App

from infra.config import load_config
from pagefleet.pricing import Usage, Worker, cost

pytestmark = pytest.mark.infra


def test_spot_on_graviton_is_refused_at_synth_saying_what_to_choose() -> None:
    """AWS: "Linux tasks with the ARM64 architecture don't support the Fargate Spot capacity
    provider": the service would never place a task."""
    spot = json.dumps({"pools": {"standard": {"spot": True}}})
    with pytest.raises(ValueError, match="Fargate Spot") as refused:
        load_config(App(context={"pagefleet:stage": "prod", "pagefleet:overrides": spot}).node)
    says = str(refused.value)
    assert "['standard']" in says
    assert 'worker_architecture "x86_64"' in says and '"spot": false' in says
    x86 = json.dumps({"worker_architecture": "x86_64", "pools": {"standard": {"spot": True}}})
    config = load_config(App(context={"pagefleet:stage": "prod", "pagefleet:overrides": x86}).node)
    assert config.pools["standard"].spot and config.worker_architecture == "x86_64"


def test_there_is_no_spot_price_for_a_graviton_task() -> None:
    with pytest.raises(ValueError, match="x86_64 tasks only"):
        cost(Usage(browser_seconds=3600), "us-east-1", Worker(architecture="arm64", spot=True))


def test_the_runtimes_emit_into_the_namespace_their_stage_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pagefleet.specs import metrics_names as m

    assert m.stage_namespace("dev") != m.stage_namespace("prod")
    monkeypatch.setenv(m.NAMESPACE_ENV, m.stage_namespace("prod"))
    assert m.runtime_namespace() == "pagefleet/prod"
    monkeypatch.delenv(m.NAMESPACE_ENV)
    assert m.runtime_namespace() == m.NAMESPACE  # the local stack's
