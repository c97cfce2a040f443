"""Lambda may invoke an event twice (an event source mapping's batch, an asynchronous
invocation's event); the local event sources do it for ``invocation_duplicate_share`` of them
(``devstack.repeated_invocations``), and the functions they invoke do each thing once: a
schedule's fire makes one job, a stream batch hands each webhook on once, and a follower
keeps each change once. The functions are the real handlers on moto; each rule's half fails
against event sources that invoke every event once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from devstack.counted_share import CountedShare
from devstack.event_sources import EventSources, StreamMapping
from devstack.fakes import FakeClock
from devstack.lambda_env import LambdaFunction
from devstack.lambda_env.protocol import LambdaContext
from devstack.provision import Provisioned
from devstack.repeated_invocations import sometimes_twice
from devstack.scheduler import SchedulerPoller
from devstack.strict_aws import LENIENT, StrictRules, at_least_once
from functions.job_changes import handler as job_changes_handler
from functions.scheduler.handler import handler as scheduler_handler
from pagefleet.client.follow import Follower, StatusUpdate
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from tests.integration.test_stream_checkpoints import REQUEST, Followers, stream_records
from tests.support.api import ApiCaller

JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}


def test_the_share_is_off_by_default_and_on_with_the_queues_duplicates() -> None:
    assert StrictRules().invocation_duplicate_share == LENIENT.invocation_duplicate_share == 0
    assert at_least_once().invocation_duplicate_share == at_least_once().sqs_duplicate_share > 0


def test_a_share_of_events_is_invoked_twice_counted_and_the_second_answer_kept() -> None:
    seen: list[int] = []

    def invoke(event: dict[str, Any]) -> int:
        seen.append(event["n"])
        return len(seen)

    counted = CountedShare()
    twice = sometimes_twice(invoke, 0.5, counted)
    answers = [twice({"n": n}) for n in range(4)]
    # Every second event again, at once; the source acts on the second answer.
    assert seen == [0, 1, 1, 2, 3, 3] and answers == [1, 3, 4, 6] and counted.chosen == 2
    assert sometimes_twice(invoke, 0, counted) is invoke  # off: the function itself


def test_a_first_invocation_that_failed_is_not_made_again_here() -> None:
    calls: list[dict[str, Any]] = []

    def failing(event: dict[str, Any]) -> None:
        calls.append(event)
        raise RuntimeError("function error")

    with pytest.raises(RuntimeError):
        sometimes_twice(failing, 1.0, CountedShare())({})
    assert len(calls) == 1  # the source's own retry rules decide what comes next


def test_the_local_event_sources_invoke_twice_as_configured(provisioned: Provisioned) -> None:
    seen: list[dict[str, Any]] = []
    sweeper = LambdaFunction("pagefleet-sweeper", lambda event, context: seen.append(event))
    functions = {
        name: LambdaFunction(name, lambda event, context: None)
        for name in ("dead_letters", "job_changes", "scheduler")
    }
    sources = EventSources(
        {**functions, "sweeper": sweeper},
        jobs_table=provisioned.jobs_table,
        dlq_urls={},
        sweeper_interval_s=3600,
        duplicate_share=1.0,
    )
    sources.sweeper._action()  # the timer's tick, run by hand
    assert len(seen) == 2 and seen[0] == seen[1] and sources.invoked_twice.chosen == 1
    lenient = EventSources(
        {**functions, "sweeper": sweeper},
        jobs_table=provisioned.jobs_table,
        dlq_urls={},
        sweeper_interval_s=3600,
    )
    lenient.sweeper._action()
    assert len(seen) == 3 and lenient.invoked_twice.chosen == 0


def test_a_stream_batch_invoked_twice_hands_each_webhook_on_once(
    svc: JobServices, provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    followers = Followers.of_the_handler(monkeypatch)
    jobs = [submit_job(svc, "t", REQUEST).job for _ in range(3)]
    for job in jobs:
        svc.store.transition("t", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    arn, records = stream_records(provisioned.jobs_table)
    invoked: list[dict[str, Any]] = []

    def function(event: dict[str, Any]) -> Any:
        invoked.append(event)
        return job_changes_handler.handler(event, None)

    counted = CountedShare()
    mapping = StreamMapping(sometimes_twice(function, 1.0, counted), arn, wait=lambda s: False)
    batch = [r for r in records if mapping.matches(r)]
    assert mapping.process(batch)

    assert len(invoked) == 2 and invoked[0] == invoked[1] and counted.chosen == 1
    assert mapping.delivered == len(batch)
    # The completion webhooks: once each (the notifier's once-only marks), not twice.
    assert sorted(w["job_id"] for w in followers.webhooks.sent) == sorted(j.job_id for j in jobs)
    # A follower is posted each status twice (delivery is at least once, docs/api.md) and
    # the SDK's follower keeps each once.
    messages = followers.live_messages()
    for job in jobs:
        statuses = [m for m in messages if m["type"] == "status" and m["job_id"] == job.job_id]
        assert len(statuses) == 4
        follower = Follower(job.job_id)
        kept = [item for m in statuses for item in follower.on_message(m)]
        # The final status is held back for the driver to yield last (after the events).
        assert [i.status for i in kept if isinstance(i, StatusUpdate)] == [JobStatus.QUEUED]
        assert follower.final is not None and follower.final.status is JobStatus.CANCELLED


def test_a_schedule_fire_invoked_twice_makes_one_job_counted_once(
    alice: ApiCaller,
    api_env: Provisioned,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    made = alice.call(
        "POST", "/v1/schedules", {"name": "hourly", "expression": "rate(1 hour)", "job": JOB}
    )
    assert made.status == 201, made.body
    schedule_id = made.body["schedule_id"]
    fired: list[str] = []

    def function(event: dict[str, Any]) -> Any:
        fired.append(event["scheduled_time"])
        context = LambdaContext("pagefleet-scheduler", request_id="r", timeout_s=30)
        return scheduler_handler(event, context)

    counted = CountedShare()
    clock = FakeClock(time.time())
    poller = SchedulerPoller(
        api_env.schedule_group, sometimes_twice(function, 1.0, counted), clock=clock.now
    )
    clock.advance(3700)  # an hour and a bit: the schedule's first fire is due
    assert poller.tick() == 1
    assert len(fired) == 2 and fired[0] == fired[1] and counted.chosen == 1

    runs = alice.call("GET", f"/v1/schedules/{schedule_id}/runs")
    assert runs.status == 200, runs.body
    (job,) = runs.body["jobs"]
    assert runs.body["skipped"] == []
    listed = alice.call("GET", "/v1/jobs", query=f"schedule_id={schedule_id}")
    assert listed.status == 200, listed.body
    assert [j["job_id"] for j in listed.body["jobs"]] == [job["job_id"]]
    # Counted once: the copy's invocation adds no fire to the function's metric.
    out = capsys.readouterr().out
    assert out.count('"ScheduleFires"') == 2  # one EMF blob: the metric's name and value
    assert caplog.messages.count("schedule fired") == 1
    assert caplog.messages.count("schedule fire repeated") == 1


def test_two_copies_of_a_fire_at_once_make_one_job(
    alice: ApiCaller, api_env: Provisioned, caplog: pytest.LogCaptureFixture
) -> None:
    """AWS's copies may overlap: both read the schedule before either recorded the run."""
    made = alice.call(
        "POST", "/v1/schedules", {"name": "hourly", "expression": "rate(1 hour)", "job": JOB}
    )
    assert made.status == 201, made.body
    schedule_id = made.body["schedule_id"]
    event = {
        "tenant_id": "alice",
        "schedule_id": schedule_id,
        "scheduled_time": "2031-01-01T00:00:00Z",
    }
    together = threading.Barrier(2)
    answers: list[Any] = []

    def invoke() -> None:
        context = LambdaContext("pagefleet-scheduler", request_id="r", timeout_s=30)
        together.wait(5)
        answers.append(scheduler_handler(dict(event), context))

    copies = [threading.Thread(target=invoke) for _ in range(2)]
    for copy in copies:
        copy.start()
    for copy in copies:
        copy.join(30)
    assert len(answers) == 2
    runs = alice.call("GET", f"/v1/schedules/{schedule_id}/runs")
    (job,) = runs.body["jobs"]
    assert [a.get("job_id") for a in answers if not a.get("repeated")] == [job["job_id"]]
    assert caplog.messages.count("schedule fired") == 1
    assert caplog.messages.count("schedule fire repeated") == 1
