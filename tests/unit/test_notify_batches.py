"""A stream batch's notifications go out together, once each (issue 36): one read of their
marks, EventBridge ten events a request, the webhook queue ten messages a request, one write
of the marks of those accepted; a refused one fails the batch and only it goes again."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from devstack.fakes.notify import FakeDeliveries, FakeEventBus, FakeNotifyDefaults, FakeWebhookQueue
from pagefleet.jobs.changes import JobChange, StreamRecord, deliver_in_order
from pagefleet.jobs.states import JobStatus
from pagefleet.notify.eventbridge import DETAIL_TYPE, JobFinishedEvents
from pagefleet.notify.ports import BusEvent
from pagefleet.notify.webhooks import WebhookNotifier
from tests.unit.test_notify import job, moved


def finished(n: int) -> list[JobChange]:
    """``n`` jobs that each ended (j0, j1, ...), one change each, in stream order."""
    return [moved(JobStatus.RUNNING, job(JobStatus.SUCCEEDED, job_id=f"j{i}"), i) for i in range(n)]


def put_ids(bus: FakeEventBus) -> list[str]:
    return [e["detail"]["job_id"] for e in bus.events]


def events() -> tuple[JobFinishedEvents, FakeEventBus, FakeDeliveries]:
    bus, deliveries = FakeEventBus(), FakeDeliveries()
    return JobFinishedEvents(bus, deliveries, retention_s=3600), bus, deliveries


def test_a_batch_of_finished_jobs_puts_each_event_once_in_order_in_few_requests() -> None:
    consumer, bus, deliveries = events()
    consumer.handle(finished(120))
    assert put_ids(bus) == [f"j{i}" for i in range(120)]
    assert {e["detail-type"] for e in bus.events} == {DETAIL_TYPE}
    assert bus.requests == 12  # ten events a PutEvents
    assert deliveries.requests == 2 + 5  # marks read 100 a request, written 25 a request


def test_a_batch_delivered_twice_puts_nothing_the_second_time() -> None:
    consumer, bus, deliveries = events()
    batch = finished(30)
    consumer.handle(batch)
    puts, requests = bus.requests, deliveries.requests
    consumer.handle(batch)
    assert put_ids(bus) == [f"j{i}" for i in range(30)]
    assert bus.requests == puts  # no PutEvents at all
    assert deliveries.requests == requests + 1  # one read of the marks, nothing written


def test_a_change_twice_in_one_batch_puts_its_event_once() -> None:
    consumer, bus, _ = events()
    [change] = finished(1)
    consumer.handle([change, change])
    assert put_ids(bus) == ["j0"]


def _refusing(ids: set[str]) -> Callable[[BusEvent], str | None]:
    def refused(event: BusEvent) -> str | None:
        return "ThrottlingException rate exceeded" if event.detail["job_id"] in ids else None

    return refused


def test_a_partly_refused_put_fails_the_batch_and_the_retry_puts_only_the_refused() -> None:
    consumer, bus, _ = events()
    changes = finished(25)
    records = [StreamRecord(sequence=c.sequence, change=c) for c in changes]
    bus.refusing = _refusing({"j3", "j17"})
    with pytest.raises(RuntimeError, match="2 of 25 events were refused: ThrottlingException"):
        consumer.handle(changes)
    assert put_ids(bus) == [f"j{i}" for i in range(25) if i not in (3, 17)]
    # The stream's reader: the batch again, then record by record; j3 still refused.
    assert deliver_in_order(records, [consumer]) == "3"
    bus.refusing = None
    assert deliver_in_order(records[3:], [consumer]) is None  # the stream resumes at j3
    assert sorted(put_ids(bus)) == sorted(f"j{i}" for i in range(25))
    assert put_ids(bus)[-2:] == ["j3", "j17"]


def test_a_redelivered_batch_queues_each_webhook_once_ten_a_request() -> None:
    queue, defaults, deliveries = FakeWebhookQueue(), FakeNotifyDefaults(), FakeDeliveries()
    defaults.put("t", "https://hooks.example.com/pf")
    consumer = WebhookNotifier(queue, defaults, deliveries, retention_s=3600)
    batch = finished(30)
    consumer.handle(batch)
    consumer.handle(batch)
    assert [m["job_id"] for m in queue.sent] == [f"j{i}" for i in range(30)]
    assert deliveries.requests == (1 + 2) + 1  # read, written 25 a request; then read only


def test_a_partly_refused_send_marks_the_sent_and_the_retry_queues_only_the_refused() -> None:
    queue, defaults = FakeWebhookQueue(), FakeNotifyDefaults()
    defaults.put("t", "https://hooks.example.com/pf")
    consumer = WebhookNotifier(queue, defaults, FakeDeliveries(), retention_s=3600)
    batch = finished(12)
    queue.refusing = lambda m: "InternalError" if m["job_id"] == "j11" else None
    with pytest.raises(RuntimeError, match="1 of 12 webhooks were refused"):
        consumer.handle(batch)
    queue.refusing = None
    consumer.handle(batch)
    assert [m["job_id"] for m in queue.sent] == [*(f"j{i}" for i in range(11)), "j11"]
    assert json.loads(queue.sent[-1]["body"])["job_id"] == "j11"
