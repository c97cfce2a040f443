"""Browser sessions on the local stack, in real Chromium against the demo site on 127.0.0.1:
steps one at a time with observations, save as a workflow and run it as a job, tenant
isolation, the idle timeout, a killed worker read as `lost` with its steps kept, and a
retried step answered from its first run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from websockets.sync.client import ClientConnection, connect

from devstack.chaos import chaos_worker_env, kill_worker, wait_until
from devstack.stack import LocalStack
from devstack.strict_aws import at_least_once
from pagefleet.browsing.models import CommandView
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.models import TenantPolicy
from pagefleet.runtime import RUNTIME
from tests.e2e.conftest import running
from tests.e2e.test_session_secrets_e2e import put_secret

# Each test gets its own worker where it matters; a short lease makes a kill show quickly.
WORKER_ENV = chaos_worker_env()


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # SQS as strict as AWS, duplicates included: a session must hold on it.
    local = LocalStack(
        api_port=0, workers=1, concurrency=2, worker_env=WORKER_ENV, strict=at_least_once()
    )
    yield from running(local)


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Iterator[PagefleetClient]:
    with stack.client() as api:
        yield api


def test_a_session_fills_the_form_step_by_step_and_saves_a_workflow_that_runs_the_same(
    stack: LocalStack, client: PagefleetClient
) -> None:
    opened = client.open_session(idle_timeout_s=120)
    assert opened.status in ("starting", "ready")
    sid = opened.session_id

    went = client.session_steps(sid, {"action": "goto", "url": f"{stack.site_url}/contact.html"})
    assert went.ok, went.error
    assert went.observation is not None
    assert went.observation.url == f"{stack.site_url}/contact.html"
    assert 'textbox "Name"' in (went.observation.aria_snapshot or "")

    filled = client.session_steps(
        sid,
        [
            {"action": "fill", "selector": "#name", "value": "Ada Lovelace"},
            {"action": "fill", "selector": "#email", "value": "ada@example.com"},
            {"action": "click", "selector": "#send"},
            {"action": "wait_for", "selector": "#confirmation"},
            {"action": "extract", "name": "reference", "selector": "#reference"},
        ],
        screenshot=True,
    )
    assert filled.ok and filled.ran == 5, filled.error
    reference = filled.result["reference"]
    assert reference.startswith("PF-")
    assert filled.observation is not None and filled.observation.title == "Thank you"
    shot = filled.observation.screenshot_url
    assert shot is not None
    assert client.download(shot)[:8] == b"\x89PNG\r\n\x1a\n"

    missed = client.session_steps(
        sid, {"action": "click", "selector": "#nothing", "timeout_ms": 300}
    )
    assert not missed.ok and missed.error is not None
    assert missed.error["step_index"] == 6  # numbered after the six steps before it
    assert client.get_session(sid).status == "ready"  # a failed step does not end it

    saved = client.save_as_workflow(sid, "contact-us", inputs={"who": "Ada Lovelace"})
    assert (saved.version, saved.steps) == (1, 6)
    closed = client.close_session(sid)
    assert closed.status in ("ready", "closed")
    ended = wait_until(
        lambda: (s := client.get_session(sid)).status == "closed" and s, 60, what="closed"
    )
    assert ended.steps is not None and len(ended.steps) == 6

    job = client.submit({"workflow": "contact-us@1", "inputs": {"who": "Ada Lovelace"}})
    done = client.wait(job.job_id, timeout=120)
    assert done.status == "succeeded", done.error
    assert client.result(done) == {"reference": reference}


def test_bad_input_is_a_4xx_naming_the_field(client: PagefleetClient) -> None:
    with pytest.raises(ApiError) as too_idle:
        client.open_session(idle_timeout_s=5000)
    assert too_idle.value.status == 422 and "idle_timeout_s" in str(too_idle.value)
    sid = client.open_session(idle_timeout_s=60).session_id
    try:
        with pytest.raises(ApiError) as bad_step:
            client.session_steps(sid, {"action": "goto", "wait_until": "load"})
        assert bad_step.value.status == 422 and "step.goto.url" in str(bad_step.value)
        with pytest.raises(ApiError) as file_url:
            client.session_steps(sid, {"action": "goto", "url": "file:///etc/passwd"})
        assert file_url.value.status == 422 and "http:// or https://" in str(file_url.value)
        # The egress guard of a job's steps (a URL from a secret): refused in the worker,
        # answered, not fatal.
        put_secret("session_target", "file:///etc/passwd")
        refused = client.session_steps(sid, {"action": "goto", "url": "{{secrets.session_target}}"})
        assert not refused.ok and refused.error is not None
        assert "file" in refused.error["message"]
        assert client.get_session(sid).status == "ready"
    finally:
        client.close_session(sid)


def test_another_tenants_session_is_404_and_only_its_owner_watches_it_live(
    stack: LocalStack, client: PagefleetClient
) -> None:
    other_key = stack.create_tenant_key("other-tenant")
    sid = client.open_session(idle_timeout_s=60).session_id
    headers = {"Authorization": f"Bearer {stack.dev_api_key}"}
    intruder_headers = {"Authorization": f"Bearer {other_key}"}
    try:
        with (
            connect(stack.live.url, additional_headers=headers, open_timeout=30) as ws,
            connect(stack.live.url, additional_headers=intruder_headers, open_timeout=30) as bad,
        ):
            bad.send(json.dumps({"action": "subscribe", "job_id": sid, "after": 0}))
            assert json.loads(bad.recv(timeout=30))["code"] == "not_found"
            ws.send(json.dumps({"action": "subscribe", "job_id": sid, "after": 0}))
            step = {"action": "goto", "url": f"{stack.site_url}/about.html"}
            assert client.session_steps(sid, step).ok
            labels = wait_for_step_events(ws)
            assert any("about.html" in label for label in labels)
        with stack.client(other_key) as other:
            for call in (
                lambda: other.get_session(sid),
                lambda: other.session_steps(
                    sid, {"action": "press", "selector": "body", "key": "Tab"}
                ),
                lambda: other.close_session(sid),
                lambda: other.save_as_workflow(sid, "stolen"),
            ):
                with pytest.raises(ApiError) as hidden:
                    call()
                assert hidden.value.status == 404
        assert client.get_session(sid).status == "ready"
    finally:
        client.close_session(sid)


def wait_for_step_events(ws: ClientConnection) -> list[str]:
    """The labels of the finished steps the socket delivers, once there is one."""
    deadline = time.monotonic() + 60
    labels: list[str] = []
    while not labels:
        raw = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        for message in raw["messages"] if raw["type"] == "batch" else [raw]:
            for event in message.get("events", []):
                if event.get("type") == "step_finished":
                    labels.append(event.get("label", ""))
    return labels


def test_an_idle_session_closes_itself(client: PagefleetClient, stack: LocalStack) -> None:
    sid = client.open_session(idle_timeout_s=5).session_id
    first = client.session_steps(sid, {"action": "goto", "url": f"{stack.site_url}/about.html"})
    assert first.ok
    ended = wait_until(
        lambda: (s := client.get_session(sid)).status == "closed" and s, 90, what="idle close"
    )
    assert ended.closed_reason == "idle"
    assert ended.steps == [{"action": "goto", "url": f"{stack.site_url}/about.html"}]
    with pytest.raises(ApiError) as after:
        client.session_steps(sid, {"action": "press", "selector": "body", "key": "Tab"})
    assert after.value.status == 409


def test_a_killed_worker_leaves_a_lost_session_that_keeps_its_steps(
    stack: LocalStack, client: PagefleetClient
) -> None:
    sid = client.open_session(idle_timeout_s=300).session_id
    went = {"action": "goto", "url": f"{stack.site_url}/"}
    assert client.session_steps(sid, went).ok
    holder = next(p for p in stack.worker_processes if p.alive())
    kill_worker(holder)
    stack.start_worker()  # the others keep serving
    # Sent to the dead worker: not a 504, and never run.
    sent = client.send_steps(sid, {"action": "press", "selector": "body", "key": "Tab"}, wait_s=0)
    assert isinstance(sent, CommandView) and sent.state == "pending"

    wait_until(lambda: client.get_session(sid).status == "lost", 120, poll=1, what="lost")
    never = client.get_command(sid, sent.command_id)
    assert never.state == "expired" and never.answer is not None and never.answer.ran == 0
    # Finding 6: the step history lived in the killed worker's memory; now it is durable.
    assert client.get_session(sid).steps == [went]
    assert client.save_as_workflow(sid, "after-a-kill").steps == 1
    with pytest.raises(ApiError) as after:
        client.session_steps(sid, {"action": "press", "selector": "body", "key": "Tab"})
    assert after.value.status == 409 and "lost" in str(after.value)


def test_a_retried_step_is_answered_from_its_first_run_and_followers_hear_of_it(
    stack: LocalStack, client: PagefleetClient
) -> None:
    sid = client.open_session(idle_timeout_s=120).session_id
    headers = {"Authorization": f"Bearer {stack.dev_api_key}"}
    try:
        with connect(stack.live.url, additional_headers=headers, open_timeout=30) as ws:
            ws.send(json.dumps({"action": "subscribe", "job_id": sid, "after": 0}))
            form = {"action": "goto", "url": f"{stack.site_url}/contact.html"}
            assert client.session_steps(sid, form).ok
            send = [
                {"action": "fill", "selector": "#name", "value": "Ada Lovelace"},
                {"action": "fill", "selector": "#email", "value": "ada@example.com"},
                {"action": "click", "selector": "#send"},
                {"action": "wait_for", "selector": "#confirmation"},
                {"action": "extract", "name": "reference", "selector": "#reference"},
            ]
            first = client.session_steps(sid, send, command_id="send-form-1")
            assert first.ok and first.result["reference"].startswith("PF-"), first.error
            # The form is gone: run again, these steps would fail. Answered from the first.
            again = client.session_steps(sid, send, command_id="send-form-1")
            assert again == first

            about = {"action": "goto", "url": f"{stack.site_url}/about.html"}
            sent = client.send_steps(sid, about, wait_s=0)  # holds nothing
            command_id = sent.command_id
            read = wait_until(
                lambda: (v := client.get_command(sid, command_id)).answer is not None and v,
                60,
                what="the answer",
            )
            assert read.state == "done" and read.answer is not None
            assert read.answer.observation is not None
            assert read.answer.observation.url == about["url"]
            heard = wait_for_command_events(ws, {"send-form-1", command_id})
            assert heard == {"send-form-1": "done", command_id: "done"}
        assert client.get_session(sid).steps == [form, *send, about]  # each step once
    finally:
        client.close_session(sid)


def wait_for_command_events(ws: ClientConnection, wanted: set[str]) -> dict[str, str]:
    """The state each wanted command's event reports, once the socket delivered them all."""
    deadline = time.monotonic() + 60
    heard: dict[str, str] = {}
    while not wanted <= heard.keys():
        raw = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        for message in raw["messages"] if raw["type"] == "batch" else [raw]:
            for event in message.get("events", []):
                if event.get("type") == "command" and event.get("command_id") in wanted:
                    heard[event["command_id"]] = event["state"]
    return heard


def test_the_api_refuses_sessions_past_the_tenants_running_slots(
    stack: LocalStack, client: PagefleetClient
) -> None:
    key = stack.create_tenant_key("slots-tenant")
    assert stack.provisioned is not None
    RUNTIME.tenant_store(stack.provisioned.tenants_table).put_policy(
        "slots-tenant", TenantPolicy(max_running=1)
    )
    with stack.client(key) as api:
        first = api.open_session(idle_timeout_s=60).session_id
        try:
            wait_until(lambda: api.get_session(first).status == "ready", 60, what="ready")
            with pytest.raises(ApiError) as refused:
                api.open_session(idle_timeout_s=60)
            assert refused.value.status == 429 and "max_running" in str(refused.value)
        finally:
            api.close_session(first)


def test_an_answer_larger_than_a_queue_message_comes_whole_by_reference(
    stack: LocalStack, client: PagefleetClient
) -> None:
    # Finding 5: an extract result or an ARIA snapshot past SQS's 256 KiB was sent as is;
    # the send failed and the session died with it.
    sid = client.open_session(idle_timeout_s=120).session_id
    try:
        went = client.session_steps(
            sid,
            [
                {"action": "goto", "url": f"{stack.site_url}/long.html"},
                {"action": "extract", "name": "catalogue", "selector": "#items"},
            ],
        )
        assert went.ok, went.error
        assert went.result == {} and set(went.parts) == {"result", "aria_snapshot"}
        assert went.parts["result"].bytes > 256 * 1024
        data = json.loads(client.answer_part(went, "result"))
        text = data["catalogue"]  # the list's text, every item of it
        assert text.count("Item ") == 6000 and "Item 6000: a line" in text
        assert went.observation is not None and went.observation.aria_truncated
        tree = client.answer_part(went, "aria_snapshot").decode()
        assert "Item 6000" in tree and len(tree) > len(went.observation.aria_snapshot or "")
        # The session lives on, and its record keeps the answer.
        assert client.session_steps(sid, {"action": "goto", "url": f"{stack.site_url}/"}).ok
        read = client.get_command(sid, went.command_id)
        assert read.answer is not None and read.answer.parts["result"].sha256 == (
            went.parts["result"].sha256
        )
    finally:
        client.close_session(sid)
