"""Schedules refuse what cannot be meant (issue 23), through the API handler against moto:
a time already past, years EventBridge Scheduler does not take, a rate too long ever to fire,
names that are no IANA time zone. Each is a 400 naming ``expression`` or ``timezone``, on
create and on change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.provision import Provisioned
from tests.support.api import ApiCaller, caller

JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}
SOON = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.fixture
def alice_schedules(api_env: Provisioned) -> ApiCaller:
    return caller(api_env, "alice")


def spec(**fields: Any) -> dict[str, Any]:
    return {"name": "s", "expression": "rate(1 hour)", "timezone": "UTC", "job": JOB, **fields}


BAD_EXPRESSIONS = [
    ("at(2000-01-01T00:00:00)", "in the past"),
    ("at(0001-01-01T00:00:00)", "1970-2199"),
    ("at(9999-12-31T23:59:59)", "1970-2199"),
    ("cron(0 0 1 1 ? 1969)", "1970-2199"),
    ("cron(0 0 1 1 ? 3000)", "1970-2199"),
    ("cron(0 0 1 1 ? 2000-2010)", "no time still to come"),
    ("cron(* * * * ? 2020)", "no time still to come"),  # answered at once, not minute by minute
    ("rate(99999999999999999999 days)", "rate()"),
    ("rate(84000 days)", "after 2199"),
]
BAD_ZONES = ["localtime", "Factory", "posix/Europe/Paris", "right/UTC", "posixrules", "Mars/Base"]


@pytest.mark.parametrize(("expression", "why"), BAD_EXPRESSIONS)
def test_expressions_that_cannot_be_meant_are_400(
    alice_schedules: ApiCaller, expression: str, why: str
) -> None:
    created = alice_schedules.call("POST", "/v1/schedules", spec(expression=expression))
    assert created.status == 400, created.body
    assert created.error["field"] == "expression"
    assert why in created.error["message"]


@pytest.mark.parametrize("zone", BAD_ZONES)
def test_names_that_are_no_iana_time_zone_are_400(alice_schedules: ApiCaller, zone: str) -> None:
    created = alice_schedules.call("POST", "/v1/schedules", spec(timezone=zone))
    assert created.status == 400, created.body
    assert created.error["field"] == "timezone"


def test_a_change_is_held_to_the_same_bounds(alice_schedules: ApiCaller) -> None:
    made = alice_schedules.call("POST", "/v1/schedules", spec(expression=f"at({SOON})"))
    assert made.status == 201, made.body
    path = f"/v1/schedules/{made.body['schedule_id']}"
    for expression, _ in BAD_EXPRESSIONS:
        patched = alice_schedules.call("PATCH", path, {"expression": expression})
        assert (patched.status, patched.error["field"]) == (400, "expression"), expression
    for zone in BAD_ZONES:
        patched = alice_schedules.call("PATCH", path, {"timezone": zone})
        assert (patched.status, patched.error["field"]) == (400, "timezone"), zone
    # What can be meant still goes through: IANA names, links among them, the last year.
    for change in (
        {"timezone": "America/Argentina/Buenos_Aires"},
        {"timezone": "US/Eastern"},
        {"expression": "cron(0 0 1 1 ? 2199)"},
        {"expression": "rate(365 days)", "timezone": "UTC"},
    ):
        patched = alice_schedules.call("PATCH", path, change)
        assert patched.status == 200, (change, patched.body)
    assert alice_schedules.call("PATCH", path, {"name": "renamed"}).status == 200
