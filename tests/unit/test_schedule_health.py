"""A schedule's health on fakes: alerting once after N failed runs in a row, recovered once,
each run counted once (redeliveries, runs out of order), and who is told what."""

from __future__ import annotations

import json
import time

from devstack.fakes import FakeClock
from devstack.fakes.notify import FakeDeliveries, FakeEventBus, FakeNotifyDefaults, FakeWebhookQueue
from devstack.fakes.schedules import FakeMirror, FakeScheduleStore
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.models import JobRequest, new_ulid
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.monitors.changes import Changes, ChangeSummary
from pagefleet.notify.eventbridge import CHANGED_DETAIL_TYPE, EventOnce, JobFinishedEvents
from pagefleet.notify.schedule_notices import (
    ALERTING_DETAIL_TYPE,
    RECOVERED_DETAIL_TYPE,
    ScheduleNotices,
)
from pagefleet.notify.webhooks import Outbox, WebhookNotifier
from pagefleet.schedules import service as schedules
from pagefleet.schedules.service import ScheduleSpec
from pagefleet.schedules.watch import ScheduleWatch

HOOK = "https://hooks.example.com/pf"
STEPS = [{"action": "goto", "url": "https://shop.example/"}]


class Setup:
    def __init__(self, alert: int | None, on: list[str]) -> None:
        self.store, self.queue, self.bus = FakeScheduleStore(), FakeWebhookQueue(), FakeEventBus()
        deliveries, defaults = FakeDeliveries(), FakeNotifyDefaults()
        outbox = Outbox(self.queue, defaults, deliveries, retention_s=3600)
        events = EventOnce(self.bus, deliveries, retention_s=3600)
        self.watch = ScheduleWatch(self.store, ScheduleNotices(outbox, events))
        self.jobs = WebhookNotifier(self.queue, defaults, deliveries, retention_s=3600)
        self.events = JobFinishedEvents(self.bus, deliveries, retention_s=3600)
        self.job = {"steps": STEPS, "notify": {"webhook": HOOK, "on": on}}
        spec = ScheduleSpec.model_validate(
            {
                "name": "watch",
                "expression": "rate(1 hour)",
                "job": self.job,
                **({"alert": {"after_failures": alert}} if alert else {}),
            }
        )
        made = schedules.create(
            self.store, FakeMirror(), FakeClock(time.time()), "t", spec, lambda job: None
        )
        self.schedule_id = made.schedule_id

    def run(
        self, status: JobStatus, *, changed: bool = False, job_id: str | None = None
    ) -> JobChange:
        record = JobRecord(
            tenant_id="t",
            job_id=job_id or new_ulid(),
            status=status,
            request=JobRequest.model_validate(self.job),
            created_at="2027-01-15T08:00:00.000Z",
            updated_at="2027-01-15T08:00:09.000Z",
            finished_at="2027-01-15T08:00:09.000Z",
            correlation_id="c",
            pool="standard",
            schedule_id=self.schedule_id,
            changes=Changes(changed=changed, summary=ChangeSummary(added=1)) if changed else None,
        )
        change = JobChange(
            old=record.model_copy(update={"status": JobStatus.RUNNING}), new=record, sequence="1"
        )
        for consumer in (self.watch, self.jobs, self.events):
            consumer.handle([change])
        return change

    @property
    def health(self):  # type: ignore[no-untyped-def]
        return self.store.get("t", self.schedule_id).health

    def events_named(self) -> list[str]:
        return [json.loads(m["body"])["event"] for m in self.queue.sent]

    def detail_types(self) -> list[str]:
        return [e["detail-type"] for e in self.bus.events if e["detail-type"] != "Job Finished"]


def test_alerting_once_after_n_failures_and_recovered_once_on_the_next_success() -> None:
    s = Setup(alert=2, on=["failed", "recovered"])
    s.run(JobStatus.FAILED)
    assert s.health.status == "ok" and s.health.consecutive_failures == 1
    third = None
    for _ in range(3):
        third = s.run(JobStatus.TIMED_OUT)
    assert s.health.status == "alerting" and s.health.consecutive_failures == 4
    assert s.detail_types() == [ALERTING_DETAIL_TYPE]
    assert s.events_named() == ["schedule.alerting"]  # not one job.failed per run
    assert third is not None
    s.watch.handle([third])  # a redelivered batch counts nothing twice
    assert s.health.consecutive_failures == 4
    ok = s.run(JobStatus.SUCCEEDED)
    s.watch.handle([ok])
    assert s.health.status == "ok" and s.health.consecutive_failures == 0
    assert s.health.last_success_job_id == ok.job.job_id
    assert s.detail_types() == [ALERTING_DETAIL_TYPE, RECOVERED_DETAIL_TYPE]
    assert s.events_named() == ["schedule.alerting", "schedule.recovered"]
    body = json.loads(s.queue.sent[0]["body"])
    assert body["schedule"]["health"] == "alerting" and body["schedule"]["after_failures"] == 2


def test_without_alert_every_failed_run_is_told_if_asked_and_cancelled_runs_do_not_count() -> None:
    s = Setup(alert=None, on=["failed"])
    s.run(JobStatus.FAILED)
    s.run(JobStatus.EXPIRED)
    s.run(JobStatus.CANCELLED)
    assert s.events_named() == ["job.failed", "job.failed"]
    assert s.health.consecutive_failures == 2 and s.health.status == "ok"
    assert s.detail_types() == []


def test_a_run_older_than_the_last_counted_changes_nothing() -> None:
    s = Setup(alert=1, on=["finished"])
    older, newer = new_ulid(), new_ulid()
    s.run(JobStatus.SUCCEEDED, job_id=max(older, newer))
    s.run(JobStatus.FAILED, job_id=min(older, newer))  # finished late
    assert s.health.status == "ok" and s.health.last_success_job_id == max(older, newer)


def test_a_changed_run_is_the_last_change_and_notified_as_changed() -> None:
    s = Setup(alert=None, on=["changed"])
    s.run(JobStatus.SUCCEEDED)
    changed = s.run(JobStatus.SUCCEEDED, changed=True)
    assert s.health.last_change is not None
    assert s.health.last_change.job_id == changed.job.job_id
    assert s.events_named() == ["job.changed"]
    assert s.detail_types() == [CHANGED_DETAIL_TYPE]
    body = json.loads(s.queue.sent[0]["body"])
    assert body["changes"]["summary"]["added"] == 1 and body["schedule_id"] == s.schedule_id
