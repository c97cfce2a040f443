"""Browser sessions on the local stack, in real Chromium against the demo site on 127.0.0.1:
steps one at a time with observations, save as a workflow and run it as a job, tenant
isolation, the idle timeout, and a killed worker read as `lost`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from websockets.sync.client import ClientConnection, connect

from devstack.chaos import chaos_worker_env, kill_worker, wait_until
from devstack.stack import LocalStack
from devstack.strict_aws import at_least_once
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.models import TenantPolicy
from pagefleet.runtime import RUNTIME
from tests.e2e.conftest import running

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

    saved = client.save_session(sid, "contact-us", inputs={"who": "Ada Lovelace"})
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
        # The egress guard of a job's steps: refused in the worker, answered, not fatal.
        refused = client.session_steps(sid, {"action": "goto", "url": "file:///etc/passwd"})
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
                lambda: other.save_session(sid, "stolen"),
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


def test_a_killed_worker_leaves_a_lost_session_never_a_hang(
    stack: LocalStack, client: PagefleetClient
) -> None:
    sid = client.open_session(idle_timeout_s=300).session_id
    assert client.session_steps(sid, {"action": "goto", "url": f"{stack.site_url}/"}).ok
    holder = next(p for p in stack.worker_processes if p.alive())
    kill_worker(holder)
    stack.start_worker()  # the others keep serving

    def lost() -> bool:
        try:
            client.session_steps(sid, {"action": "press", "selector": "body", "key": "Tab"})
        except ApiError as exc:
            return exc.status == 409 and "lost" in str(exc)
        return False

    wait_until(lost, 120, poll=1, what="the session reads lost")
    assert client.get_session(sid).status == "lost"


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
