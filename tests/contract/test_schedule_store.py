"""Schedules: records, runs once per scheduled time, the mirror kept in step."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from devstack.fakes import FakeClock
from devstack.fakes.schedules import FakeMirror, FakeScheduleStore
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.schedules import DynamoScheduleStore
from pagefleet.adapters.scheduler import EventBridgeSchedulerMirror, SchedulerTarget, mirror_name
from pagefleet.errors import InvalidRequest, NotFound
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.schedules import service as schedules
from pagefleet.schedules.health import ScheduleHealth, after_run
from pagefleet.schedules.service import ScheduleChange, ScheduleRun, ScheduleSpec, ScheduleStore

GROUP = "pagefleet-test"
JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest) -> ScheduleStore:
    if backend == "fake":
        return FakeScheduleStore()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoScheduleStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)


def ok(job: dict) -> None:
    if "steps" not in job:
        raise InvalidRequest("steps: Field required", field="steps")


def spec(**extra: object) -> ScheduleSpec:
    return ScheduleSpec.model_validate(
        {"name": "nightly", "expression": "cron(0 2 * * ? *)", "job": JOB, **extra}
    )


def test_a_schedule_is_recorded_mirrored_changed_and_deleted(store: ScheduleStore) -> None:
    mirror, clock = FakeMirror(), FakeClock(time.time())
    made = schedules.create(store, mirror, clock, "t", spec(), ok)
    assert made.synced and mirror.schedules[made.schedule_id].expression == "cron(0 2 * * ? *)"
    assert store.get("t", made.schedule_id).synced
    clock.advance(5)
    paused = schedules.change(
        store, mirror, clock, "t", made.schedule_id, ScheduleChange(enabled=False), ok
    )
    assert paused.enabled is False and mirror.schedules[made.schedule_id].enabled is False
    assert paused.next_fire_times(datetime.now(UTC)) == []
    with pytest.raises(NotFound):
        store.get("other", made.schedule_id)
    schedules.delete(store, mirror, "t", made.schedule_id)
    assert made.schedule_id not in mirror.schedules
    with pytest.raises(NotFound):
        store.get("t", made.schedule_id)


def test_a_failed_mirror_is_retried_by_the_sweeper(store: ScheduleStore) -> None:
    mirror, clock = FakeMirror(), FakeClock(time.time())
    mirror.fail = True
    made = schedules.create(store, mirror, clock, "t", spec(), ok)
    assert not made.synced and (("t", made.schedule_id) in store.unsynced())
    mirror.fail = False
    assert schedules.resync(store, mirror) == 1
    assert store.unsynced() == [] and made.schedule_id in mirror.schedules


def test_bad_expressions_time_zones_and_jobs_name_their_field(store: ScheduleStore) -> None:
    mirror, clock = FakeMirror(), FakeClock(time.time())
    for bad, field in (
        (spec(expression="cron(0 2 * * * *)"), "expression"),
        (spec(timezone="Mars/Base"), "timezone"),
        (spec(job={"nosteps": True}), "job.steps"),
    ):
        with pytest.raises(InvalidRequest) as refused:
            schedules.create(store, mirror, clock, "t", bad, ok)
        assert refused.value.field == field
    assert store.list_for("t") == []


def test_a_fire_submits_once_per_scheduled_time_and_skips_overlaps(
    store: ScheduleStore,
) -> None:
    mirror, clock = FakeMirror(), FakeClock(time.time())
    made = schedules.create(store, mirror, clock, "t", spec(overlap="skip"), ok)
    submitted: dict[str, str] = {}
    status: dict[str, JobStatus] = {}

    def submit(job: dict, key: str) -> str:
        job_id = submitted.setdefault(key, f"job-{len(submitted) + 1}")
        status.setdefault(job_id, JobStatus.RUNNING)
        return job_id

    def fired(at: str) -> schedules.Fired:
        return schedules.fire(
            store, clock, "t", made.schedule_id, at, submit=submit, job_status=status.get
        )

    def fire(at: str) -> ScheduleRun:
        return fired(at).run

    first = fired("2026-12-01T02:00:00Z")
    again = fired("2026-12-01T02:00:00Z")  # the Scheduler retried the same fire
    assert first.run.job_id == again.run.job_id == "job-1" and len(submitted) == 1
    assert (first.repeated, again.repeated) == (False, True)
    overlapped = fire("2026-12-02T02:00:00Z")
    assert overlapped.job_id is None and "still running" in (overlapped.skipped or "")
    status["job-1"] = JobStatus.SUCCEEDED
    assert fire("2026-12-03T02:00:00Z").job_id == "job-2"
    runs = store.runs("t", made.schedule_id, 10)
    assert [r.scheduled_time for r in runs] == [
        "2026-12-03T02:00:00Z",
        "2026-12-02T02:00:00Z",
        "2026-12-01T02:00:00Z",
    ]
    # A copy of the first fire, invoked after a later one: nothing new, and it says so.
    late = fired("2026-12-01T02:00:00Z")
    assert late.repeated and len(submitted) == 2
    assert store.runs("t", made.schedule_id, 10) == runs
    assert store.get("t", made.schedule_id).last_run == runs[0]


def test_health_is_counted_once_per_run_and_a_change_keeps_it(store: ScheduleStore) -> None:
    mirror, clock = FakeMirror(), FakeClock(time.time())
    made = schedules.create(store, mirror, clock, "t", spec(alert={"after_failures": 1}), ok)
    failed = after_run(
        ScheduleHealth(), job_id="01" + "a" * 24, ok=False, at="t1", changes=None, after_failures=1
    )
    assert failed is not None and failed.status == "alerting"
    assert store.record_health("t", made.schedule_id, failed, counted=None)
    # A second writer that read the health before this one counts again, and is refused.
    assert not store.record_health("t", made.schedule_id, failed, counted=None)
    store.set_baseline("t", made.schedule_id, "01" + "b" * 24)
    # Changing the definition keeps what runs wrote and the pinned baseline.
    clock.advance(1)
    schedules.change(store, mirror, clock, "t", made.schedule_id, ScheduleChange(name="x"), ok)
    kept = store.get("t", made.schedule_id)
    assert kept.name == "x" and kept.alert is not None and kept.alert.after_failures == 1
    assert kept.health.status == "alerting" and kept.health.consecutive_failures == 1
    assert kept.baseline_job_id == "01" + "b" * 24
    store.set_baseline("t", made.schedule_id, None)
    cleared = schedules.change(
        store,
        mirror,
        clock,
        "t",
        made.schedule_id,
        ScheduleChange.model_validate({"alert": None}),
        ok,
    )
    assert cleared.alert is None and store.get("t", made.schedule_id).baseline_job_id is None
    with pytest.raises(NotFound):
        store.set_baseline("t", "01" + "c" * 24, None)
    with pytest.raises(NotFound):
        store.record_health("t", "01" + "c" * 24, failed, counted=None)


def test_a_manual_run_is_listed_with_the_fires(store: ScheduleStore) -> None:
    mirror, clock = FakeMirror(), FakeClock(time.time())
    made = schedules.create(store, mirror, clock, "t", spec(enabled=False), ok)
    run = schedules.run_now(store, clock, "t", made.schedule_id, submit=lambda job, at: "job-9")
    assert run.manual and run.job_id == "job-9"
    assert [r.job_id for r in store.runs("t", made.schedule_id, 10)] == ["job-9"]
    assert store.get("t", made.schedule_id).last_run == run


def eventbridge_mirror() -> tuple[Any, SchedulerTarget, EventBridgeSchedulerMirror]:
    """The Scheduler client, the target and the mirror, in a fresh schedule group."""
    client = RUNTIME.client("scheduler")
    client.create_schedule_group(Name=GROUP)
    target = SchedulerTarget(
        group=GROUP,
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:pagefleet-scheduler",
        role_arn="arn:aws:iam::123456789012:role/pagefleet-scheduler",
        dead_letter_arn="arn:aws:sqs:us-east-1:123456789012:pagefleet-scheduler-dlq",
    )
    return client, target, EventBridgeSchedulerMirror(client, target)


def test_the_eventbridge_mirror_creates_updates_and_deletes(provisioned: Provisioned) -> None:
    client, target, mirror = eventbridge_mirror()
    store = DynamoScheduleStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    made = schedules.create(store, mirror, FakeClock(time.time()), "t", spec(), ok)
    got = client.get_schedule(Name=mirror_name(made.schedule_id), GroupName=GROUP)
    assert got["ScheduleExpression"] == "cron(0 2 * * ? *)" and got["State"] == "ENABLED"
    assert '"scheduled_time":"<aws.scheduler.scheduled-time>"' in got["Target"]["Input"]
    assert got["Target"]["DeadLetterConfig"]["Arn"] == target.dead_letter_arn
    schedules.change(
        store,
        mirror,
        FakeClock(time.time() + 1),
        "t",
        made.schedule_id,
        ScheduleChange(enabled=False, expression="rate(5 minutes)"),
        ok,
    )
    got = client.get_schedule(Name=mirror_name(made.schedule_id), GroupName=GROUP)
    assert (got["State"], got["ScheduleExpression"]) == ("DISABLED", "rate(5 minutes)")
    schedules.delete(store, mirror, "t", made.schedule_id)
    assert client.list_schedules(GroupName=GROUP)["Schedules"] == []


def test_a_one_time_schedule_is_deleted_by_the_scheduler_once_fired_and_still_reads(
    provisioned: Provisioned,
) -> None:
    """``at()``: ``ActionAfterCompletion: DELETE`` on the mirror (the local Scheduler deletes
    it after the fire, as AWS does); afterwards the record still reads, changes and deletes,
    and nothing makes a mirror of a fire that is over. Recurring schedules keep theirs."""
    from devstack.scheduler import SchedulerPoller

    client, _, mirror = eventbridge_mirror()
    store = DynamoScheduleStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)
    # A fixed 10:00 UTC: the hour the poller skips must not hold the nightly's 02:00 (from
    # the wall clock, between 01:00 and 02:00 it fired the nightly too).
    clock = FakeClock(datetime(2031, 6, 2, 10, 0, tzinfo=UTC).timestamp())
    at = datetime.fromtimestamp(clock.now() + 3600, UTC).replace(microsecond=0)
    once = spec(name="once", expression=f"at({at:%Y-%m-%dT%H:%M:%S})")
    made = schedules.create(store, mirror, clock, "t", once, ok)
    nightly = schedules.create(store, mirror, clock, "t", spec(), ok)
    name = mirror_name(made.schedule_id)
    assert client.get_schedule(Name=name, GroupName=GROUP)["ActionAfterCompletion"] == "DELETE"
    recurring = client.get_schedule(Name=mirror_name(nightly.schedule_id), GroupName=GROUP)
    assert recurring["ActionAfterCompletion"] == "NONE"

    def fire(event: dict) -> None:
        schedules.fire(
            store,
            clock,
            event["tenant_id"],
            event["schedule_id"],
            event["scheduled_time"],
            submit=lambda job, key: "job-1",
            job_status=lambda job_id: None,
        )

    poller = SchedulerPoller(GROUP, fire, clock=clock.now)
    clock.advance(3601)
    assert poller.tick() == 1
    left = {s["Name"] for s in client.list_schedules(GroupName=GROUP)["Schedules"]}
    assert left == {mirror_name(nightly.schedule_id)}  # the fired one-time mirror is gone

    # The record reads as a schedule that ran once and will not run again.
    fired = store.get("t", made.schedule_id)
    assert fired.last_run is not None and fired.last_run.job_id == "job-1"
    assert fired.next_fire_times(datetime.fromtimestamp(clock.now(), UTC)) == []
    # A change of its name or job is the record's: no mirror is made again for a past fire.
    renamed = schedules.change(
        store, mirror, clock, "t", made.schedule_id, ScheduleChange(name="once, done"), ok
    )
    assert renamed.synced and store.get("t", made.schedule_id).name == "once, done"
    assert store.get("t", made.schedule_id).last_run == fired.last_run
    assert schedules.resync(store, mirror, clock=clock) == 0
    left = {s["Name"] for s in client.list_schedules(GroupName=GROUP)["Schedules"]}
    assert left == {mirror_name(nightly.schedule_id)}
    # Moving it to a time that has passed too is refused; to a future time, it fires again.
    with pytest.raises(InvalidRequest) as refused:
        schedules.change(
            store,
            mirror,
            clock,
            "t",
            made.schedule_id,
            ScheduleChange(expression=f"at({at:%Y-%m-%dT%H:%M:%S})"),
            ok,
        )
    assert refused.value.field == "expression"
    later = at.replace(year=at.year + 1)
    moved = schedules.change(
        store,
        mirror,
        clock,
        "t",
        made.schedule_id,
        ScheduleChange(expression=f"at({later:%Y-%m-%dT%H:%M:%S})"),
        ok,
    )
    assert moved.synced and client.get_schedule(Name=name, GroupName=GROUP)["State"] == "ENABLED"
    schedules.delete(store, mirror, "t", made.schedule_id)
    schedules.delete(store, mirror, "t", nightly.schedule_id)
    assert client.list_schedules(GroupName=GROUP)["Schedules"] == []


def test_a_one_time_schedule_in_the_past_is_refused(store: ScheduleStore) -> None:
    clock = FakeClock(time.time())
    past = datetime.fromtimestamp(clock.now() - 60, UTC)
    with pytest.raises(InvalidRequest) as refused:
        schedules.create(
            store, FakeMirror(), clock, "t", spec(expression=f"at({past:%Y-%m-%dT%H:%M:%S})"), ok
        )
    assert refused.value.field == "expression" and "in the past" in refused.value.message
    assert store.list_for("t") == []
