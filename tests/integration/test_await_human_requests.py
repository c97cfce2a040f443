"""await_human's limits through the API handlers on moto: a wait longer than the bound, a
wait of nothing, or no prompt is a 422 naming the field, before any job exists."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.provision import Provisioned
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from pagefleet.workflow.steps.control import MAX_HUMAN_WAIT_S
from tests.support.api import ApiCaller

GOTO = {"action": "goto", "url": "http://127.0.0.1:9/"}


@pytest.fixture
def caller(api_env: Provisioned) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "tenant-a")
    return ApiCaller(key)


@pytest.mark.parametrize(
    ("step", "field", "reason_part"),
    [
        (
            {"action": "await_human", "prompt": "solve it", "timeout_s": MAX_HUMAN_WAIT_S + 1},
            "steps[1].await_human.timeout_s",
            f"less than or equal to {MAX_HUMAN_WAIT_S}",
        ),
        (
            {"action": "await_human", "prompt": "solve it", "timeout_s": 0},
            "steps[1].await_human.timeout_s",
            "greater than or equal to 1",
        ),
        ({"action": "await_human", "prompt": ""}, "steps[1].await_human.prompt", "at least 1"),
        ({"action": "await_human"}, "steps[1].await_human.prompt", "Field required"),
    ],
)
def test_await_humans_limits_are_422_naming_the_field(
    caller: ApiCaller, step: dict[str, Any], field: str, reason_part: str
) -> None:
    refused = caller.post_job({"steps": [GOTO, step]})
    assert refused.status == 422, refused.body
    error = refused.error
    details = error.get("details") or [{"field": error["field"], "reason": error["message"]}]
    assert any(d["field"] == field and reason_part in d["reason"] for d in details), error
