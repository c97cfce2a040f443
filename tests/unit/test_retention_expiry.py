"""When an ended job's expiry (DynamoDB's TTL attribute) is written: with a worker's outcome,
else by the jobs stream's retention consumer, on in-memory fakes and real stream shapes."""

from __future__ import annotations

from typing import Any

from devstack.fakes import FakeClock, fake_services
from devstack.fakes.job_store import FakeJobStore
from pagefleet.adapters.dynamodb.codec import record_to_item, serialize
from pagefleet.adapters.dynamodb.stream import job_changes
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.hooks import NoHooks
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.tenant_defaults import LimitDefaults
from pagefleet.tenancy.limits import effective_limits
from pagefleet.tenancy.retention import RetentionConsumer
from tests.unit.test_lifecycle import request, run_once
from tests.unit.test_retention_delete import RecordedData

DAY = 86_400


class KeepTwoDays(NoHooks):
    def retention_s(self, tenant_id: str) -> int | None:
        return 2 * DAY


def finish(svc: JobServices, outcome: Outcome) -> str:
    from pagefleet.jobs.service import submit_job

    submit_job(svc, "t1", request(), idempotency_key=None)
    job, _ = run_once(svc)
    svc.lifecycle.finish(job, outcome, "w1")
    return job.job_id


def test_a_final_outcome_carries_the_tenants_expiry(clock: FakeClock) -> None:
    svc = fake_services(clock, hooks=KeepTwoDays())
    store = svc.store
    assert isinstance(store, FakeJobStore)
    done = finish(svc, Outcome(JobStatus.SUCCEEDED, result={"ok": 1}))
    assert store.expiry("t1", done) == int(clock.now()) + 2 * DAY
    # A retry is not an end: nothing expires while the job may still run.
    error = JobError(kind="navigation_failed", message="reset", retryable=True)
    retrying = finish(svc, Outcome(JobStatus.RETRY_SCHEDULED, error=error, retry_delay_s=5))
    assert store.expiry("t1", retrying) is None


class SlowToAnswer(KeepTwoDays):
    """A retention lookup that takes a while (a loaded table): the clock moves meanwhile."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def retention_s(self, tenant_id: str) -> int | None:
        self.clock.advance(1.7)
        return super().retention_s(tenant_id)


def test_the_expiry_is_the_retention_after_the_recorded_finish(clock: FakeClock) -> None:
    from datetime import datetime

    clock.advance(0.6)  # mid-second: a later reading would fall in another second
    svc = fake_services(clock, hooks=SlowToAnswer(clock))
    store = svc.store
    assert isinstance(store, FakeJobStore)
    done = store.get("t1", finish(svc, Outcome(JobStatus.SUCCEEDED, result={"ok": 1})))
    assert done.finished_at is not None
    finished = datetime.fromisoformat(done.finished_at.replace("Z", "+00:00")).timestamp()
    assert store.expiry("t1", done.job_id) == int(finished) + 2 * DAY


def test_without_a_known_retention_the_outcome_leaves_it_to_the_consumer(
    svc: JobServices,
) -> None:
    store = svc.store
    assert isinstance(store, FakeJobStore)
    done = finish(svc, Outcome(JobStatus.SUCCEEDED, result={"ok": 1}))
    assert store.expiry("t1", done) is None


def _record(job: JobRecord, **image: Any) -> dict[str, Any]:
    keys = {"sk": {"S": f"JOB#{job.job_id}"}}
    return {"eventName": "MODIFY", "dynamodb": {"Keys": keys, **image}}


def _image(job: JobRecord, expires_at: int | None) -> dict[str, Any]:
    item = record_to_item(job)
    if expires_at is not None:
        item["expires_at"] = expires_at
    return serialize(item)


def test_the_stream_says_which_write_set_the_expiry(svc: JobServices) -> None:
    job = svc.store.get("t1", finish(svc, Outcome(JobStatus.SUCCEEDED, result={"ok": 1})))
    ran = job.model_copy(update={"status": JobStatus.RUNNING})
    set_now = _record(job, OldImage=_image(ran, None), NewImage=_image(job, 1_000))
    # A redriven job cancelled before the consumer removed its dead letter's expiry: the
    # cancel's image still holds the old expiry, which this write did not set.
    stale = _record(job, OldImage=_image(ran, 900), NewImage=_image(job, 900))
    changes = job_changes([set_now, stale])
    assert [c.expiry_set for c in changes] == [1_000, None]


def test_the_consumer_writes_an_expiry_only_where_the_outcome_did_not(svc: JobServices) -> None:
    class Expiries(RecordedData):
        def set_expiry(self, tenant_id: str, job_id: str, expires_at: int, **_: object) -> None:
            self.asked.append(f"set_expiry {job_id} {expires_at}")

    data = Expiries()
    limits = effective_limits(TenantPolicy(retention_days=3), LimitDefaults())
    consumer = RetentionConsumer(data, lambda tenant: limits)
    ended = svc.store.get("t1", finish(svc, Outcome(JobStatus.SUCCEEDED, result={"ok": 1})))
    ended = ended.model_copy(update={"finished_at": "2026-12-01T00:00:10Z"})
    ran = ended.model_copy(update={"status": JobStatus.RUNNING, "finished_at": None})
    other = ended.model_copy(update={"job_id": "j2"})
    consumer.handle(
        [
            JobChange(old=ran, new=ended, sequence="1", expiry_set=1_000),
            JobChange(old=ran.model_copy(update={"job_id": "j2"}), new=other, sequence="2"),
        ]
    )
    ended_at = 1_796_083_210  # 2026-12-01T00:00:10Z
    assert data.asked == [f"set_expiry j2 {ended_at + 3 * DAY}"]
