"""A price watcher on the local stack, as a user runs it: the example schedule (track,
expect, alert after one failure) run now while the demo shop changes between runs.

Run 1 has no baseline; run 2 (one price changed, one product added) is ``changed`` with
exactly those records; run 3 (the list emptied) fails ``data_quality`` and turns the
schedule alerting (one ``Schedule Alerting`` event); run 4 (the list back) recovers it
(``Schedule Recovered``). The ``job.changed`` webhook arrives once, signed. The CLI shows
the run and its changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from devstack.provision import queue_arn
from devstack.stack import LocalStack
from devstack.strict_aws import await_settled
from pagefleet.client import PagefleetClient
from pagefleet.jobs.states import JobStatus
from pagefleet.notify import signing
from pagefleet.runtime import RUNTIME
from tests.support.monitors import run_now, set_shop, until, watcher_spec
from tests.support.receiver import webhook_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
EVENT_TYPES = ["Schedule Alerting", "Schedule Recovered", "Job Changed"]


def cli(stack: LocalStack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.cli_env()}
    command = [sys.executable, "-m", "pagefleet.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


def event_queue() -> str:
    sqs, events = RUNTIME.client("sqs"), RUNTIME.client("events")
    url = sqs.create_queue(QueueName="e2e-monitor-events")["QueueUrl"]
    arn = queue_arn(sqs, url)  # no call: a queue is unusable in its first second
    events.put_rule(
        Name="e2e-monitors",
        EventPattern=json.dumps({"source": ["pagefleet"], "detail-type": EVENT_TYPES}),
    )
    events.put_targets(Rule="e2e-monitors", Targets=[{"Id": "q", "Arn": arn}])
    # AWS: a queue is usable one second after it is made; its receives wait for that.
    assert await_settled(sqs, [url], timeout_s=10)
    return str(url)


def drain(url: str, seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for message in (
        RUNTIME.client("sqs")
        .receive_message(QueueUrl=url, WaitTimeSeconds=1, MaxNumberOfMessages=10)
        .get("Messages", [])
    ):
        seen.append(json.loads(message["Body"]))
    return seen


def test_a_price_watcher_reports_changes_fails_on_bad_data_and_alerts_once(
    stack: LocalStack, client: PagefleetClient
) -> None:
    events_url, seen = event_queue(), list[dict[str, Any]]()
    secret = client.signing_secret()
    spec = watcher_spec(stack.site_url)
    with webhook_receiver() as hooks:
        spec["job"]["notify"]["webhook"] = hooks.url
        made = client.create_schedule(spec)
        sid = made.schedule_id
        assert made.alert == {"after_failures": 1} and made.health == "ok"

        set_shop(stack.site_url, None)
        first = run_now(client, sid)
        assert first.changes is not None and first.changes.baseline_job_id is None
        assert not first.changes.changed and "first successful run" in (first.changes.note or "")

        set_shop(stack.site_url, "state-price-drop.json")
        second = run_now(client, sid)
        changes = second.changes
        assert changes is not None and changes.changed and changes.baseline_job_id == first.job_id
        assert (changes.summary.added, changes.summary.removed, changes.summary.changed) == (
            1,
            0,
            1,
        )
        products = changes.records["products"]
        assert [r["sku"] for r in products.added] == ["CMP-4"]
        assert [
            (c.key, {k: (v.before, v.after) for k, v in c.fields.items()}) for c in products.changed
        ] == [("LAN-2", {"price": ("18.50", "15.90")})]
        assert changes.visual is not None and changes.visual.ratio > 0  # a row more
        last = client.schedule(sid).last_change
        assert last is not None and last.job_id == second.job_id

        set_shop(stack.site_url, "state-empty.json")
        third = client.wait(client.run_schedule(sid).job_id, timeout=180)
        assert third.status is JobStatus.FAILED and third.attempt == 1
        assert third.error is not None and third.error.kind == "data_quality"
        assert third.error.details == [
            {"path": "result.products", "reason": "has 0 items, expected at least 1"}
        ]
        until("alerting", lambda: client.schedule(sid).health == "alerting")
        assert client.schedule(sid).consecutive_failures == 1

        set_shop(stack.site_url, "state-price-drop.json")  # the list is back, as it was
        fourth = client.wait(client.run_schedule(sid).job_id, timeout=180)
        assert fourth.status is JobStatus.SUCCEEDED and fourth.changes is not None
        assert not fourth.changes.changed and fourth.changes.baseline_job_id == second.job_id
        until("recovered", lambda: client.schedule(sid).health == "ok")

        until(
            "both schedule events",
            lambda: (
                {e["detail-type"] for e in drain(events_url, seen)}
                >= {"Schedule Alerting", "Schedule Recovered"}
            ),
        )
        hooks.wait_for(3, timeout=120)  # changed, alerting, recovered
        time.sleep(2)  # nothing more is on its way (a second changed would have been queued)
        kinds = [json.loads(r.body)["event"] for r in hooks.requests]
    types = [e["detail-type"] for e in drain(events_url, seen)]
    assert types.count("Schedule Alerting") == 1 and types.count("Schedule Recovered") == 1
    assert types.count("Job Changed") == 1
    recovered = next(e for e in seen if e["detail-type"] == "Schedule Recovered")
    assert recovered["detail"]["schedule_id"] == sid
    assert recovered["detail"]["job_id"] == fourth.job_id
    assert sorted(kinds) == ["job.changed", "schedule.alerting", "schedule.recovered"]
    changed = next(r for r in hooks.requests if json.loads(r.body)["event"] == "job.changed")
    assert changed.headers["Pagefleet-Event"] == "job.changed"
    assert signing.verify(
        secret, changed.headers["Pagefleet-Signature"], changed.body, now=time.time()
    )
    body = json.loads(changed.body)
    assert body["job_id"] == second.job_id and body["changes"]["summary"]["added"] == 1
    assert body["changes"]["records"]["products"]["added"][0]["sku"] == "CMP-4"

    shown = cli(stack, "changes", second.job_id)
    assert shown.returncode == 0, shown.stderr
    assert "LAN-2" in shown.stdout and "18.50" in shown.stdout and "15.90" in shown.stdout
    listed = cli(stack, "schedules", "runs", sid)
    assert "+1 -0 ~1" in listed.stdout and "no baseline" in listed.stdout, listed.stdout


def test_the_cli_runs_a_schedule_now_and_pins_a_baseline(
    stack: LocalStack, client: PagefleetClient
) -> None:
    spec = watcher_spec(stack.site_url, name="cli-watch")
    spec["job"].pop("notify")
    sid = client.create_schedule(spec).schedule_id
    set_shop(stack.site_url, None)
    ran = cli(stack, "schedules", "run", sid, "--wait")
    assert ran.returncode == 0, ran.stderr
    assert "no baseline" in ran.stdout
    job_id = client.schedule_runs(sid).jobs[0].job_id
    pinned = cli(stack, "schedules", "baseline", sid, job_id)
    assert pinned.returncode == 0 and job_id in pinned.stdout, pinned.stderr
    assert client.schedule(sid).baseline_job_id == job_id
