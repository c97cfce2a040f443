"""A job an await_human step parked tells its owner: ``job.waiting_for_human`` to its webhook
(with what it asks) and ``Job Waiting For Human`` on EventBridge (ids, no prompt), once per
wait; both carry the console link that opens the job's live view with takeover (where the
console is served: CloudFront's domain on AWS, the gateway's port on the local stack)."""

from __future__ import annotations

import json

import pytest

from devstack.fakes.notify import FakeDeliveries, FakeEventBus, FakeNotifyDefaults, FakeWebhookQueue
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.states import JobStatus
from pagefleet.notify.eventbridge import WAITING_DETAIL_TYPE, JobFinishedEvents
from pagefleet.notify.routing import FINISHED
from pagefleet.notify.webhooks import WebhookNotifier, payload
from tests.unit.test_notify import job

WAIT = HumanWait(
    prompt="Type the code sent to your phone",
    step_index=2,
    asked_at="2027-01-15T08:00:09.000Z",
    timeout_at=1_800_000_900,
)


def _parked() -> JobChange:
    running = job(JobStatus.RUNNING, notify={"webhook": "https://hooks.example.com/pf"})
    waiting = running.model_copy(update={"status": JobStatus.WAITING_FOR_HUMAN, "human": WAIT})
    return JobChange(old=running, new=waiting, sequence="1")


def test_a_parked_job_is_told_to_its_webhook_with_its_prompt_once() -> None:
    queue = FakeWebhookQueue()
    notifier = WebhookNotifier(queue, FakeNotifyDefaults(), FakeDeliveries(), retention_s=60)
    notifier.handle([_parked()])
    notifier.handle([_parked()])  # the stream delivers a batch twice
    (message,) = queue.sent
    assert message["event"] == "job.waiting_for_human"
    sent = json.loads(message["body"])
    assert sent["status"] == "waiting_for_human"
    assert sent["human"]["prompt"] == WAIT.prompt and sent["human"]["step_index"] == 2


def test_a_parked_job_is_put_on_eventbridge_without_its_prompt() -> None:
    bus = FakeEventBus()
    JobFinishedEvents(bus, FakeDeliveries(), retention_s=60).handle([_parked()])
    (event,) = bus.events
    assert event["detail-type"] == WAITING_DETAIL_TYPE
    detail = json.loads(event["detail"]) if isinstance(event["detail"], str) else event["detail"]
    assert detail["status"] == "waiting_for_human" and detail["step_index"] == 2
    assert WAIT.prompt not in json.dumps(detail)


CONSOLES = [
    "https://d1234abcd.cloudfront.net/console/",  # AWS: the distribution's domain
    "https://console.example.com/console/",  # AWS: a custom domain
    "http://127.0.0.1:8080/console/",  # the local stack: the gateway's port
]


@pytest.mark.parametrize("console", CONSOLES)
def test_both_notifications_link_to_the_jobs_live_view_with_takeover(console: str) -> None:
    change = _parked()
    assert change.new is not None
    link = f"{console}#/jobs/{change.new.job_id}?live=1&takeover=1"
    queue = FakeWebhookQueue()
    WebhookNotifier(
        queue, FakeNotifyDefaults(), FakeDeliveries(), retention_s=60, console_url=console
    ).handle([change])
    (message,) = queue.sent
    assert json.loads(message["body"])["console_url"] == link
    bus = FakeEventBus()
    JobFinishedEvents(bus, FakeDeliveries(), retention_s=60, console_url=console).handle([change])
    (event,) = bus.events
    detail = json.loads(event["detail"]) if isinstance(event["detail"], str) else event["detail"]
    assert detail["console_url"] == link
    assert set(detail) == {
        "tenant_id",
        "job_id",
        "correlation_id",
        "status",
        "step_index",
        "timeout_at",
        "console_url",
    }


def test_no_console_no_link_and_other_events_carry_none() -> None:
    change = _parked()
    assert change.new is not None
    queue = FakeWebhookQueue()
    WebhookNotifier(queue, FakeNotifyDefaults(), FakeDeliveries(), retention_s=60).handle([change])
    (message,) = queue.sent
    assert "console_url" not in json.loads(message["body"])
    bus = FakeEventBus()
    JobFinishedEvents(bus, FakeDeliveries(), retention_s=60).handle([change])
    (event,) = bus.events
    detail = json.loads(event["detail"]) if isinstance(event["detail"], str) else event["detail"]
    assert detail["console_url"] is None
    # A job that finished has no page left to take over: no link.
    finished = change.new.model_copy(update={"status": JobStatus.SUCCEEDED})
    body = payload(finished, "dlv_1", FINISHED, console_url=CONSOLES[0])
    assert "console_url" not in body
