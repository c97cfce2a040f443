"""Schedules through the REST API after EventBridge Scheduler has deleted a fired one-time
schedule (``ActionAfterCompletion: DELETE``): the record still reads, changes and deletes,
and no mirror comes back for a fire that is over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.schedules import DynamoScheduleStore
from pagefleet.runtime import RUNTIME
from pagefleet.schedules.service import Schedule, ScheduleRun
from tests.support.api import ApiCaller

JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}


def test_a_fired_one_time_schedule_reads_changes_and_deletes(
    alice: ApiCaller, api_env: Provisioned
) -> None:
    fired_at = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    stamp = fired_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    store = DynamoScheduleStore(RUNTIME.client("dynamodb"), api_env.jobs_table)
    schedule = Schedule(
        schedule_id="01J0000000000000000000ONCE",
        tenant_id="alice",
        name="once",
        expression=f"at({fired_at:%Y-%m-%dT%H:%M:%S})",
        job=JOB,
        created_at=(fired_at - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        updated_at=(fired_at - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        synced=True,
    )
    store.create(schedule)
    store.record_run(
        "alice",
        schedule.schedule_id,
        ScheduleRun(scheduled_time=stamp, job_id="01J0000000000000000000JOB1", fired_at=stamp),
    )
    scheduler = RUNTIME.client("scheduler")
    assert scheduler.list_schedules(GroupName=api_env.schedule_group)["Schedules"] == []

    path = f"/v1/schedules/{schedule.schedule_id.lower()}"
    got = alice.call("GET", path)
    assert got.status == 200, got.body
    assert got.body["next_fire_times"] == [] and got.body["last_run"]["scheduled_time"] == stamp
    renamed = alice.call("PATCH", path, {"name": "once, done"})
    assert renamed.status == 200, renamed.body
    assert renamed.body["name"] == "once, done" and renamed.body["synced"] is True
    assert renamed.body["last_run"]["job_id"] == "01J0000000000000000000JOB1"
    assert scheduler.list_schedules(GroupName=api_env.schedule_group)["Schedules"] == []
    moved = alice.call("PATCH", path, {"expression": f"at({fired_at:%Y-%m-%dT%H:%M:%S})"})
    assert moved.status == 400 and moved.error["field"] == "expression", moved.body
    assert alice.call("DELETE", path).status == 204
    assert alice.call("GET", path).status == 404
