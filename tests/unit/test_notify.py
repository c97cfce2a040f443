"""Completion notifications on fakes: what is queued and put for which transitions, once."""

from __future__ import annotations

import json
import random

from devstack.fakes.notify import FakeDeliveries, FakeEventBus, FakeNotifyDefaults, FakeWebhookQueue
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import Artifact, JobError, JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.notify import signing
from pagefleet.notify.eventbridge import DETAIL_TYPE, SOURCE, JobFinishedEvents
from pagefleet.notify.sender import WEBHOOK_BACKOFF, backoff_s
from pagefleet.notify.webhooks import WebhookNotifier, delivery_id


def job(status: JobStatus, *, notify: dict[str, object] | None = None, **kw: object) -> JobRecord:
    body: dict[str, object] = {"steps": [{"action": "goto", "url": "http://x/"}], "name": "n"}
    if notify is not None:
        body["notify"] = notify
    return JobRecord.model_validate(
        {
            "tenant_id": "t",
            "job_id": "j1",
            "status": status,
            "request": JobRequest.model_validate(body),
            "created_at": "2027-01-15T08:00:00.000Z",
            "updated_at": "2027-01-15T08:00:09.000Z",
            "finished_at": "2027-01-15T08:00:09.000Z",
            "correlation_id": "corr-1",
            "pool": "standard",
            "attempt": 2,
            "result": {"secret-ish": "value"},
            **kw,
        }
    )


def moved(old: JobStatus, new: JobRecord, seq: int = 1) -> JobChange:
    return JobChange(old=new.model_copy(update={"status": old}), new=new, sequence=str(seq))


def notifier() -> tuple[WebhookNotifier, FakeWebhookQueue, FakeNotifyDefaults]:
    queue, defaults = FakeWebhookQueue(), FakeNotifyDefaults()
    return WebhookNotifier(queue, defaults, FakeDeliveries(), retention_s=3600), queue, defaults


def test_a_final_state_queues_one_webhook_with_the_payload() -> None:
    consumer, queue, _ = notifier()
    failed = job(
        JobStatus.FAILED,
        notify={"webhook": "https://hooks.example.com/pf"},
        error=JobError(kind="step_failed", message="no #buy", step_index=1),
        artifacts=[
            Artifact(name="failure.png", key="k", size=3, content_type="image/png", sha256="ab")
        ],
    )
    change = moved(JobStatus.RUNNING, failed)
    consumer.handle([change])
    consumer.handle([change])  # the stream delivered the batch again
    (message,) = queue.sent
    assert message["url"] == "https://hooks.example.com/pf"
    assert message["delivery_id"] == delivery_id(failed)
    body = json.loads(message["body"])
    assert body["event"] == "job.finished" and body["status"] == "failed"
    assert body["job_id"] == "j1" and body["finished_at"] == "2027-01-15T08:00:09.000Z"
    assert body["error"] == {
        "kind": "step_failed",
        "message": "no #buy",
        "retryable": False,
        "step_index": 1,
    }
    assert body["artifacts"] == [
        {
            "name": "failure.png",
            "size": 3,
            "content_type": "image/png",
            "sha256": "ab",
            "attempt": 1,
        }
    ]
    assert "result" not in body and "key" not in json.dumps(body["artifacts"])


def test_only_final_transitions_notify_and_the_tenant_default_applies() -> None:
    consumer, queue, defaults = notifier()
    consumer.handle([moved(JobStatus.QUEUED, job(JobStatus.RUNNING))])
    consumer.handle([moved(JobStatus.RUNNING, job(JobStatus.SUCCEEDED))])
    assert queue.sent == []  # no webhook anywhere
    defaults.put("t", "https://hooks.example.com/default")
    consumer.handle([moved(JobStatus.RUNNING, job(JobStatus.RUNNING, attempt=3))])
    consumer.handle([moved(JobStatus.RUNNING, job(JobStatus.TIMED_OUT))])
    assert [m["url"] for m in queue.sent] == ["https://hooks.example.com/default"]
    # A job that says null wants none, whatever the tenant's default.
    consumer.handle([moved(JobStatus.QUEUED, job(JobStatus.CANCELLED, notify={"webhook": None}))])
    assert len(queue.sent) == 1


def test_a_redriven_job_that_ends_again_is_notified_again() -> None:
    consumer, queue, defaults = notifier()
    defaults.put("t", "https://hooks.example.com/pf")
    dead = job(JobStatus.DEAD_LETTERED)
    consumer.handle([moved(JobStatus.RUNNING, dead)])
    later = job(JobStatus.SUCCEEDED, updated_at="2027-01-16T08:00:00.000Z")
    consumer.handle([moved(JobStatus.RUNNING, later)])
    assert [json.loads(m["body"])["status"] for m in queue.sent] == ["dead_lettered", "succeeded"]
    assert queue.sent[0]["delivery_id"] != queue.sent[1]["delivery_id"]


def test_eventbridge_gets_ids_and_status_only_once_per_transition() -> None:
    bus = FakeEventBus()
    consumer = JobFinishedEvents(bus, FakeDeliveries(), retention_s=3600)
    change = moved(
        JobStatus.RUNNING,
        job(JobStatus.FAILED, error=JobError(kind="x", message="password hunter2 refused")),
    )
    consumer.handle([change, moved(JobStatus.QUEUED, job(JobStatus.RUNNING))])
    consumer.handle([change])
    assert bus.events == [
        {
            "source": SOURCE,
            "detail-type": DETAIL_TYPE,
            "detail": {
                "tenant_id": "t",
                "job_id": "j1",
                "correlation_id": "corr-1",
                "status": "failed",
            },
        }
    ]


def test_signatures_verify_only_with_the_secret_the_body_and_a_fresh_time() -> None:
    secret = signing.new_secret()
    body = b'{"job_id":"j1","status":"succeeded"}'
    header = signing.sign(secret, 1_800_000_000, body)
    assert header.startswith("t=1800000000,v1=")
    assert signing.verify(secret, header, body, now=1_800_000_100)
    assert not signing.verify(secret, header, body + b" ", now=1_800_000_100)
    assert not signing.verify(signing.new_secret(), header, body, now=1_800_000_100)
    assert not signing.verify(secret, header, body, now=1_800_000_000 + 301)  # replayed late
    assert not signing.verify(secret, "v1=abc", body, now=1_800_000_000)
    assert not signing.verify(secret, "t=x,v1=abc", body, now=1_800_000_000)


def test_backoff_grows_to_hours_in_total() -> None:
    rng = random.Random(7)
    delays = [backoff_s(WEBHOOK_BACKOFF, n, rng) for n in range(1, 12)]
    for n, delay in enumerate(delays, start=1):
        ceiling = min(3600, 10 * 2 ** (n - 1))
        assert ceiling / 2 - 1 <= delay <= ceiling
    assert sum(delays) > 2 * 3600  # retried for hours before the dead-letter queue


def test_notify_on_picks_the_events_and_an_omitted_webhook_is_the_tenants() -> None:
    consumer, queue, defaults = notifier()
    defaults.put("t", "https://hooks.example.com/default")
    # on: failed only: no job.finished, one job.failed, to the tenant's default webhook.
    consumer.handle([moved(JobStatus.RUNNING, job(JobStatus.FAILED, notify={"on": ["failed"]}))])
    consumer.handle([moved(JobStatus.RUNNING, job(JobStatus.SUCCEEDED, notify={"on": ["failed"]}))])
    assert [json.loads(m["body"])["event"] for m in queue.sent] == ["job.failed"]
    assert queue.sent[0]["url"] == "https://hooks.example.com/default"
    assert queue.sent[0]["event"] == "job.failed"
    assert queue.sent[0]["delivery_id"] != delivery_id(job(JobStatus.FAILED))
    # A scheduled run's failure is its schedule's to tell (pagefleet.schedules.watch).
    scheduled = job(JobStatus.FAILED, notify={"on": ["failed"]}, schedule_id="s" * 26)
    consumer.handle([moved(JobStatus.RUNNING, scheduled)])
    assert len(queue.sent) == 1


def test_a_job_that_waits_for_review_is_told_when_asked() -> None:
    consumer, queue, _ = notifier()
    base = job(
        JobStatus.RUNNING,
        notify={"webhook": "https://hooks.example.com/pf", "on": ["needs_review", "finished"]},
    )
    waiting = base.model_copy(update={"status": JobStatus.NEEDS_REVIEW})
    consumer.handle([JobChange(old=base, new=waiting, sequence="1")])
    (message,) = queue.sent  # once, though both topics asked for it
    assert message["event"] == "job.needs_review"
    assert json.loads(message["body"])["status"] == "needs_review"


class CountedDefaults(FakeNotifyDefaults):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get(self, tenant_id: str) -> str | None:
        self.reads += 1
        return super().get(tenant_id)


def test_the_tenant_default_is_read_once_per_ttl_for_the_jobs_that_end_meanwhile() -> None:
    from pagefleet.notify.routing import CachedDefaults

    stored, now = CountedDefaults(), [100.0]
    stored.put("t", "https://hooks.example.com/old")
    queue = FakeWebhookQueue()
    cached = CachedDefaults(stored, ttl_s=10, clock=lambda: now[0])
    consumer = WebhookNotifier(queue, cached, FakeDeliveries(), retention_s=3600)
    ended = [
        job(JobStatus.SUCCEEDED, updated_at=f"2027-01-15T08:00:1{n}.000Z", job_id=f"j{n}")
        for n in range(4)
    ]
    consumer.handle([moved(JobStatus.RUNNING, ended[0])])
    consumer.handle([moved(JobStatus.RUNNING, ended[1])])
    assert stored.reads == 1  # the second job's webhook came from the cache
    stored.put("t", "https://hooks.example.com/new")  # changed by another process (the API)
    now[0] += 9.9
    consumer.handle([moved(JobStatus.RUNNING, ended[2])])
    now[0] += 0.2  # past the ttl: the change applies
    consumer.handle([moved(JobStatus.RUNNING, ended[3])])
    assert stored.reads == 2
    assert [m["url"] for m in queue.sent] == ["https://hooks.example.com/old"] * 3 + [
        "https://hooks.example.com/new"
    ]
    # A change made through the cache applies at once, and no default is cached too.
    cached.put("t", None)
    assert cached.get("t") is None and cached.get("t") is None and stored.reads == 3
