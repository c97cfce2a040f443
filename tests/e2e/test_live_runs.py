"""Live runs and notifications on the local stack with real Chromium (issue 10's "done when").

Timing promises are checked on timestamps the system records (the stream's write time, the
delivery's send time, the worker's event times, the webhook attempt's time), never by a
test's sleep; the bounds they are held to are the platform's own (batching windows, the
per-second write rate), so a loaded machine slows the run but cannot fail the checks.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from devstack.event_sources import STREAM_BATCHING_WINDOW_S
from devstack.live_parts import LiveOptions
from devstack.provision import queue_arn
from devstack.stack import LocalStack
from devstack.strict_aws import await_settled
from pagefleet.adapters.dynamodb.codec import job_sk
from pagefleet.adapters.dynamodb.events import counter_sk
from pagefleet.client import PagefleetClient
from pagefleet.client.follow import StatusUpdate
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.live.events import RunEvent
from pagefleet.live.numbers import RESERVE
from pagefleet.notify import signing
from pagefleet.runtime import RUNTIME
from tests.e2e.conftest import running
from tests.support.receiver import webhook_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CAP = 4  # messages per second per connection, lowered so that a burst exceeds it
# A connection that follows nothing is closed after this long: short, so the idle test is
# quick, and above what a loaded machine takes between a connect and its first subscribe.
IDLE_S = 5


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    local = LocalStack(
        api_port=0,
        log_dir=Path(os.environ["PAGEFLEET_E2E_LOGS"])
        if "PAGEFLEET_E2E_LOGS" in os.environ
        else None,
        workers=1,
        concurrency=2,
        live=LiveOptions(reaper_interval_s=1),
        lambda_env={
            "PAGEFLEET_LIVE_MESSAGES_PER_S": str(CAP),
            "PAGEFLEET_IDLE_UNSUBSCRIBED_S": str(IDLE_S),
            "PAGEFLEET_BACKOFF_BASE_S": "1",
        },
    )
    yield from running(local)


@pytest.fixture(scope="module")
def pages(stack: LocalStack) -> Iterator[str]:
    """A page that logs 500 console lines in about 2 seconds (10 bursts of 50)."""
    import http.server

    from devstack.loopback import serve_on_loopback

    html = b"""<!doctype html><title>noisy</title><body><script>
      let n = 0;
      const tick = setInterval(() => {
        for (let i = 0; i < 50; i++) console.log('line ' + (n++));
        if (n >= 500) {
          clearInterval(tick);
          document.body.insertAdjacentHTML('beforeend', '<p id=done>done</p>');
        }
      }, 200);
    </script></body>"""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = serve_on_loopback(Handler, "noisy-page")
    try:
        yield server.url
    finally:
        server.stop()


def socket(stack: LocalStack, key: str | None = None) -> ClientConnection:
    headers = {"Authorization": f"Bearer {key or stack.dev_api_key}"}
    return connect(stack.live.url, additional_headers=headers, open_timeout=30)


def receive(ws: ClientConnection, until: Any, timeout: float = 120) -> list[dict[str, Any]]:
    """Messages (batches unpacked, each with its frame as ``posted``) until ``until`` holds
    for one of them."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        raw = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        inner = raw["messages"] if raw["type"] == "batch" else [raw]
        done = False
        for message in inner:
            got.append({**message, "sent_at": raw.get("sent_at"), "posted": raw})
            done = until(got[-1]) or done
        if done:
            return got


def final(message: dict[str, Any]) -> bool:
    return message.get("type") == "status" and bool(message.get("final"))


STEPS = [
    {"action": "goto", "url": "{{inputs.site}}"},
    {"action": "extract", "name": "title", "selector": "h1"},
    {"action": "sleep", "ms": 300},
    {"action": "screenshot", "name": "home.png"},
]


def test_a_follower_sees_steps_in_order_and_the_final_status_within_a_second(
    stack: LocalStack, client: PagefleetClient, record_property: Any
) -> None:
    other_key = stack.create_tenant_key("tenant-other")
    job = client.submit({"steps": STEPS, "inputs": {"site": stack.site_url}})
    with socket(stack, other_key) as intruder:
        intruder.send(json.dumps({"action": "subscribe", "job_id": job.job_id, "after": 0}))
        refused = json.loads(intruder.recv(timeout=30))
        # Following its own (empty) console keeps it from being closed as idle meanwhile.
        intruder.send(json.dumps({"action": "subscribe", "jobs": "all"}))
        assert json.loads(intruder.recv(timeout=30)) == {"type": "subscribed", "jobs": "all"}
        # The follower connects only now and subscribes at once: a connection that follows
        # nothing is closed after IDLE_S, which the exchange above can outlast under load.
        with socket(stack) as ws:
            ws.send(json.dumps({"action": "subscribe", "job_id": job.job_id, "after": 0}))
            got = receive(ws, final)
        intruder.send(json.dumps({"action": "ping"}))
        assert json.loads(intruder.recv(timeout=30)) == {"type": "pong"}  # nothing came between
    assert refused == {
        "type": "error",
        "code": "not_found",
        "message": "no such job",
        "job_id": job.job_id,
    }
    connections = RUNTIME.client("dynamodb").scan(TableName=stack.provisioned.connections_table)
    rooms = [i["pk"]["S"] for i in connections["Items"] if i["pk"]["S"].startswith("ROOM#")]
    assert f"ROOM#tenant-other#{job.job_id}" not in rooms  # the intruder never joined

    events = [e for m in got if m["type"] == "events" for e in m["events"]]
    seqs = [e["seq"] for e in events]
    unique = sorted(set(seqs))
    assert unique == list(range(1, len(unique) + 1))  # none missing
    ordered = [e for n, e in enumerate(events) if e["seq"] not in seqs[:n]]
    assert [e["seq"] for e in ordered] == unique  # in order (a repeat may come again)
    steps = [(e["type"], e["index"]) for e in ordered if e["type"].startswith("step_")]
    assert steps == [
        (kind, i) for i in range(len(STEPS)) for kind in ("step_started", "step_finished")
    ]
    assert all(e["outcome"] == "ok" for e in ordered if e["type"] == "step_finished")
    assert any(e["type"] == "navigation" and e["url"].startswith(stack.site_url) for e in ordered)
    last = got[-1]
    assert last["status"] == "succeeded"
    # The last step was sent before the final status (a job's messages keep their order).
    assert got.index(last) > max(n for n, m in enumerate(got) if m["type"] == "events")
    # About a second from its write, by design: the stream reader gets the final write in
    # its first batch (stream batching window: 0.25 s here, 1 s on AWS) and posts it in that
    # invocation; a rate rule holds it for under a second at most (when the job's last
    # events follow an events message of the same second, the status waits behind them).
    # Checked on the system's own stamps: the write (the stream's), the batch's arrival and
    # the post; never on this test's clock.
    assert STREAM_BATCHING_WINDOW_S <= 1.0
    assert "written_at" in last
    for status in [m for m in got if m["type"] == "status" and "written_at" in m]:
        assert status["written_at"] <= status["received_at"] <= status["sent_at"], status
        assert status["posted"].get("held_s", 0) <= 1.0
    record_property("final_status_latency_s", round(last["sent_at"] - last["written_at"], 3))


def test_500_console_lines_reach_a_follower_in_at_most_3_messages(
    stack: LocalStack, client: PagefleetClient, pages: str
) -> None:
    job = client.submit(
        {
            "steps": [
                {"action": "goto", "url": pages},
                {"action": "wait_for", "selector": "#done", "timeout_ms": 30000},
                # Lines go out with the periodic writes, not the attempt's last one.
                {"action": "sleep", "ms": 1500},
            ],
            "options": {"capture_console": True},
        }
    )
    with socket(stack) as ws:
        # From the first event: on a loaded machine the worker can write its first lines
        # before this subscription is recorded, and a follower without "after" sees only
        # what comes next. The catch-up may carry lines a live post brings again (and a
        # stream batch may be delivered twice): only a frame that brings a line first is a
        # write of the worker's, counted below.
        ws.send(json.dumps({"action": "subscribe", "job_id": job.job_id, "after": 0}))
        got = receive(ws, final)
    lines = {}
    carriers = set()  # the frames that brought a line first: a line again is no new write
    for message in got:
        for event in message.get("events", []):
            if event["type"] == "console" and event["message"].startswith("line "):
                if event["seq"] not in lines:
                    carriers.add(id(message["posted"]))
                lines.setdefault(event["seq"], event)
    assert [lines[s]["message"] for s in sorted(lines)] == [f"line {n}" for n in range(500)]
    # The page took S seconds (its own timestamps, as the worker recorded them); the worker
    # writes at most once a second: at most floor(S) + 1 writes fall within those S seconds
    # (the first may be due to an earlier event), plus the one after the last line. So at
    # most floor(S) + 2 messages: 3 for the page's 1.8 s, as issue 10 asks (one write per
    # line would be hundreds).
    span = epoch_of_iso(lines[max(lines)]["at"]) - epoch_of_iso(lines[min(lines)]["at"])
    assert len(carriers) <= math.floor(span) + 2, (len(carriers), span)
    if span < 2:
        assert len(carriers) <= 3


def test_the_per_connection_cap_holds_under_a_burst(
    stack: LocalStack, client: PagefleetClient
) -> None:
    with socket(stack) as console:
        console.send(json.dumps({"action": "subscribe", "jobs": "all"}))
        assert json.loads(console.recv(timeout=30)) == {"type": "subscribed", "jobs": "all"}
        jobs = [
            client.submit({"steps": [{"action": "goto", "url": stack.site_url}]}).job_id
            for _ in range(24)
        ]
        ended: set[str] = set()

        def all_ended(message: dict[str, Any]) -> bool:
            if final(message):
                ended.add(message["job_id"])
            return ended >= set(jobs)

        got = receive(console, all_ended, timeout=300)
    # Messages per second, by the budget each one counted against (its ``window``; a post
    # reserved late in a second may leave in the next one on a loaded machine).
    posts: dict[int, set[int]] = {}
    for message in got:
        posts.setdefault(message["posted"]["window"], set()).add(id(message["posted"]))
    assert max(len(p) for p in posts.values()) <= CAP
    assert all(int(m["posted"]["sent_at"]) >= m["posted"]["window"] for m in got)
    for job_id in jobs:  # nothing was dropped: every job's statuses arrived, in order
        statuses = [m["status"] for m in got if m.get("job_id") == job_id and m["type"] == "status"]
        assert statuses[-1] == "succeeded" and "running" in statuses, (job_id, statuses)


def test_a_connection_that_follows_nothing_is_closed(stack: LocalStack) -> None:
    with socket(stack) as idle, socket(stack) as busy:
        busy.send(json.dumps({"action": "subscribe", "jobs": "all"}))
        busy.recv(timeout=30)
        closed = None
        try:
            while True:
                idle.recv(timeout=60)  # the reaper closes it after IDLE_S
        except ConnectionClosed as exc:
            closed = exc
        assert closed is not None and closed.rcvd is not None and closed.rcvd.code == 1001
        busy.send(json.dumps({"action": "ping"}))
        replies = [json.loads(busy.recv(timeout=30)) for _ in range(1)]
        while replies[-1] != {"type": "pong"}:  # status messages of other jobs may come first
            replies.append(json.loads(busy.recv(timeout=30)))


def cli(stack: LocalStack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.cli_env()}
    command = [sys.executable, "-m", "pagefleet.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


def test_follow_shows_progress_and_exits_by_final_state(stack: LocalStack, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"steps": STEPS, "inputs": {"site": stack.site_url}}))
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "steps": [
                    {"action": "goto", "url": stack.site_url},
                    {"action": "click", "selector": "#no-such-button", "timeout_ms": 500},
                ],
                "max_attempts": 1,
            }
        )
    )
    ok = cli(stack, "submit", str(good), "--follow")
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "step 1/4" in ok.stdout and "step 4/4" in ok.stdout and "succeeded" in ok.stdout
    failed = cli(stack, "submit", str(bad), "--follow")
    assert failed.returncode == 1, failed.stderr + failed.stdout
    assert "✗ step 2/2" in failed.stdout and "#no-such-button" in failed.stdout
    job_id = re.search(r"submitted (\S+?),", failed.stdout).group(1)  # type: ignore[union-attr]
    again = cli(stack, "follow", job_id, "--poll")  # an ended job, read by polling
    assert again.returncode == 1 and "failed" in again.stdout


def test_the_sdk_follows_live_async_and_by_polling(
    stack: LocalStack, client: PagefleetClient
) -> None:
    job = client.submit({"steps": STEPS, "inputs": {"site": stack.site_url}})
    live = list(client.follow(job.job_id, timeout=120))
    polled = list(client.follow(job.job_id, live=False, timeout=120))

    async def follow_async() -> list[Any]:
        return [item async for item in client.follow_async(job.job_id, timeout=120)]

    asynced = asyncio.run(follow_async())

    class NoSocket(PagefleetClient):  # the WebSocket cannot be reached: falls back to polling
        def live_info(self) -> Any:
            info = super().live_info()
            return info.model_copy(update={"url": "ws://127.0.0.1:9/live"})

    with NoSocket(stack.api_url, stack.dev_api_key) as unreachable:
        fallback = list(unreachable.follow(job.job_id, timeout=120))
    for items in (live, polled, asynced, fallback):
        events = [i.seq for i in items if isinstance(i, RunEvent)]
        assert events == list(range(1, len(events) + 1)), events
        assert isinstance(items[-1], StatusUpdate) and items[-1].status.value == "succeeded"
    assert [i.seq for i in live if isinstance(i, RunEvent)] == [
        i.seq for i in polled if isinstance(i, RunEvent)
    ]


def test_completion_webhooks_are_signed_retried_and_events_reach_a_rule(
    stack: LocalStack, client: PagefleetClient, record_property: Any
) -> None:
    sqs, events = RUNTIME.client("sqs"), RUNTIME.client("events")
    target = sqs.create_queue(QueueName="e2e-finished-jobs")["QueueUrl"]
    arn = queue_arn(sqs, target)  # no call: a queue is unusable in its first second
    events.put_rule(
        Name="e2e-finished",
        EventPattern=json.dumps({"source": ["pagefleet"], "detail-type": ["Job Finished"]}),
    )
    events.put_targets(Rule="e2e-finished", Targets=[{"Id": "q", "Arn": arn}])
    # AWS: a queue is usable one second after it is made; its receives wait for that.
    assert await_settled(sqs, [target], timeout_s=10)
    secret = client.signing_secret()
    # The same secret for the tenant's command and the operator's (Secrets Manager).
    assert cli(stack, "webhooks", "secret").stdout.strip() == secret
    operator = cli(stack, "admin", "signing-secret", "--tenant", "dev", "--stage", "local")
    assert operator.stdout.strip() == secret, operator.stderr
    with webhook_receiver() as good, webhook_receiver() as flaky:
        flaky.answers = [500]
        ok = client.submit(
            {"steps": STEPS, "inputs": {"site": stack.site_url}, "notify": {"webhook": good.url}}
        )
        retried = client.submit(
            {"steps": STEPS, "inputs": {"site": stack.site_url}, "notify": {"webhook": flaky.url}}
        )
        (delivered,) = good.wait_for(1, timeout=120)
        first, second = flaky.wait_for(2, timeout=120)
    done = client.get(ok.job_id)
    body = json.loads(delivered.body)
    assert (body["job_id"], body["status"]) == (ok.job_id, "succeeded")
    assert [a["name"] for a in body["artifacts"]] == [a.name for a in done.artifacts]
    header = delivered.headers["Pagefleet-Signature"]
    assert signing.verify(secret, header, delivered.body, now=time.time())
    attempt = client.deliveries(ok.job_id)[0]
    assert attempt.status == "delivered" and attempt.status_code == 204
    # Within 2 s of the final state, by design: queued by the stream reader's first batch
    # (window <= 1 s), POSTed on the queue's first receive (no batching window, attempt 1,
    # no backoff). The system's stamps: the job's finish, then the attempt.
    assert done.finished_at is not None and attempt.attempt == 1
    latency = epoch_of_iso(attempt.at) - epoch_of_iso(done.finished_at)
    assert latency >= 0
    record_property("webhook_latency_s", round(latency, 3))
    assert second.headers["Pagefleet-Delivery"] == first.headers["Pagefleet-Delivery"]
    assert (first.headers["Pagefleet-Attempt"], second.headers["Pagefleet-Attempt"]) == ("1", "2")
    history = client.deliveries(retried.job_id)
    assert [(a.attempt, a.status, a.status_code) for a in history] == [
        (1, "failed", 500),
        (2, "delivered", 204),
    ]
    assert history[0].next_attempt_in_s is not None
    listed = cli(stack, "webhooks", "deliveries", retried.job_id, "--json")
    assert [d["status"] for d in json.loads(listed.stdout)] == ["failed", "delivered"]
    seen = {}
    deadline = time.monotonic() + 60
    while len(seen) < 2 and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=target, WaitTimeSeconds=1).get("Messages", []):
            event = json.loads(message["Body"])
            seen[event["detail"]["job_id"]] = event
    assert set(seen) >= {ok.job_id, retried.job_id}
    assert seen[ok.job_id]["detail-type"] == "Job Finished"
    assert set(seen[ok.job_id]["detail"]) == {"tenant_id", "job_id", "correlation_id", "status"}


def test_events_are_listed_in_order_and_expire_with_the_job(
    stack: LocalStack, client: PagefleetClient
) -> None:
    job = client.submit({"steps": STEPS, "inputs": {"site": stack.site_url}})
    client.wait(job.job_id, timeout=120)
    listed, after = [], 0
    while True:
        page = client.events(job.job_id, after=after, limit=3)
        listed += page.events
        after = page.next_after
        if not page.more:
            break
    assert [e.seq for e in listed] == list(range(1, len(listed) + 1))
    kinds = [e.type.value for e in listed]
    assert kinds[0] == "state" and listed[0].status == "running"
    assert kinds[-1] == "state" and listed[-1].status == "succeeded"
    other = stack.create_tenant_key("tenant-events")
    with PagefleetClient(stack.api_url, other) as stranger, pytest.raises(Exception, match="404"):
        stranger.events(job.job_id)
    # Stored with the job's expiry (the table's TTL attribute): they go when it goes.
    items = RUNTIME.client("dynamodb").query(
        TableName=stack.provisioned.jobs_table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
        ExpressionAttributeValues={":pk": {"S": "TENANT#dev"}, ":p": {"S": f"EVT#{job.job_id}#"}},
    )["Items"]
    created = epoch_of_iso(client.get(job.job_id).created_at or "")
    assert items and {int(i["expires_at"]["N"]) for i in items} == {int(created) + 30 * 24 * 3600}
    # Numbered from what the claim reserved on the record: no counter of their own.
    db = RUNTIME.client("dynamodb")
    key = {"pk": {"S": "TENANT#dev"}}
    table = stack.provisioned.jobs_table
    counter = db.get_item(TableName=table, Key={**key, "sk": {"S": counter_sk(job.job_id)}})
    assert "Item" not in counter
    record = db.get_item(TableName=table, Key={**key, "sk": {"S": job_sk(job.job_id)}})["Item"]
    assert int(record["events_seq"]["N"]) == RESERVE and len(listed) <= RESERVE


def test_local_up_prints_the_live_url(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    from pagefleet.cli import render

    render.print_stack(stack)
    out = capsys.readouterr().out
    assert "live (WebSocket)" in out and stack.live.url in out
    assert stack.live.url.startswith("ws://127.0.0.1:") and stack.live.url.endswith("/live")
