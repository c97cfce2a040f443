"""Browser sessions through the API handler (API Gateway events) on moto: opened as a job and
nothing else (no queue per session), 4xx naming the field, another tenant's session a 404, closing a
session that never started, and its audit records."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.models import iso, utcnow
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from pagefleet.tenancy.sessions import SessionArchive
from tests.support.api import ApiCaller, caller


@pytest.fixture
def owner(api_env: Provisioned) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "sessions-a")
    return ApiCaller(key)


@pytest.fixture
def stranger(api_env: Provisioned) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "sessions-b")
    return ApiCaller(key)


def queues() -> list[str]:
    urls = boto3.client("sqs").list_queues().get("QueueUrls", [])
    return sorted(url.rpartition("/")[2] for url in urls)


def test_a_session_opens_as_a_queued_job_and_makes_no_queue(
    owner: ApiCaller, api_env: Provisioned
) -> None:
    """Issue 32: a queue pair was made per session (used in its first second, left behind
    when the API died between making it and queueing the job). The open's audit record is
    written while the job is queued, and is there when the open answers."""
    before = set(queues())
    opened = owner.call("POST", "/v1/browser-sessions", body={"idle_timeout_s": 60})
    assert opened.status == 201, opened.body
    sid = opened.body["session_id"]
    audit = caller(api_env, "ops", admin=True).call("GET", "/v1/admin/audit").body["records"]
    [record] = [r for r in audit if r["target"] == sid]
    assert record["action"] == "browser_session.opened"
    assert record["tenant_id"] == "sessions-a" and record["actor"].startswith("sessions-a:")
    assert opened.body["status"] == "starting" and opened.body["idle_timeout_s"] == 60
    assert opened.headers["Location"].endswith(f"/browser-sessions/{sid}")
    job = owner.call("GET", f"/v1/jobs/{sid}")
    assert job.body["status"] == "queued"  # a job in every sense: listed, counted
    assert set(queues()) == before

    closed = owner.call("DELETE", f"/v1/browser-sessions/{sid}")
    assert closed.status == 200 and closed.body["status"] == "closed"
    assert owner.call("GET", f"/v1/browser-sessions/{sid}").body["closed_reason"] == "closed"
    assert set(queues()) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"idle_timeout_s": 1801}, "idle_timeout_s"),
        ({"max_duration_s": 5}, "max_duration_s"),
        ({"options": {"viewport": {"width": 1}}}, "options.viewport.width"),
        ({"options": {"extra_headers": {"Host": "x.example"}}}, "options.extra_headers"),
        ({"options": {"user_agent": "bot\r\nX: 1"}}, "options.user_agent"),
        ({"options": {"locale": "abcd"}}, "options.locale"),
        ({"use_session": "../x"}, "use_session"),
        ({"pool": "gpu"}, "pool"),  # not one of the deployment's pools
        ({"pool": "Heavy-1"}, "pool"),
    ],
)
def test_bad_options_are_a_422_naming_the_field(owner: ApiCaller, body: dict, field: str) -> None:
    refused = owner.call("POST", "/v1/browser-sessions", body=body)
    assert refused.status == 422, refused.body
    assert refused.error["field"] == field


def test_a_step_body_with_neither_step_nor_steps_is_a_4xx(owner: ApiCaller) -> None:
    sid = owner.call("POST", "/v1/browser-sessions", body={}).body["session_id"]
    try:
        refused = owner.call("POST", f"/v1/browser-sessions/{sid}/steps", body={})
        assert refused.status == 422 and refused.error["field"] == "step"
        unknown = owner.call(
            "POST", f"/v1/browser-sessions/{sid}/steps", body={"step": {"action": "fly"}}
        )
        assert unknown.status == 422 and unknown.error["field"].startswith("step")
        # A key Playwright does not know: refused before it reaches the worker.
        typo = owner.call(
            "POST",
            f"/v1/browser-sessions/{sid}/steps",
            body={"step": {"action": "press", "selector": "#q", "key": "Esc"}},
        )
        assert typo.status == 422 and typo.error["field"].startswith("step"), typo.body
        assert "'Escape'" in json.dumps(typo.body)
    finally:
        owner.call("DELETE", f"/v1/browser-sessions/{sid}")


def test_another_tenants_session_is_a_404_on_every_route(
    owner: ApiCaller, stranger: ApiCaller
) -> None:
    sid = owner.call("POST", "/v1/browser-sessions", body={}).body["session_id"]
    base = f"/v1/browser-sessions/{sid}"
    try:
        for method, path, body in (
            ("GET", base, None),
            ("DELETE", base, None),
            ("POST", f"{base}/steps", {"step": {"action": "press", "selector": "a", "key": "Tab"}}),
            ("POST", f"{base}/save-as-workflow", {"name": "stolen"}),
        ):
            assert stranger.call(method, path, body=body).status == 404, (method, path)
        assert owner.call("GET", base).body["status"] == "starting"
        # A job id that is not a session is not one either.
        job = owner.call(
            "POST", "/v1/jobs", body={"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}
        )
        assert owner.call("GET", f"/v1/browser-sessions/{job.body['job_id']}").status == 404
    finally:
        owner.call("DELETE", base)


def test_a_step_not_answered_in_time_is_a_202_with_its_command_read_by_its_id(
    owner: ApiCaller, stranger: ApiCaller
) -> None:
    # Finding 3: a step sent while the session starts was a 504, and ran later anyway.
    sid = owner.call("POST", "/v1/browser-sessions", body={}).body["session_id"]
    base = f"/v1/browser-sessions/{sid}"
    body = {"step": {"action": "press", "selector": "a", "key": "Tab"}, "wait_s": 0}
    key = {"Idempotency-Key": "press-tab-1"}
    try:
        sent = owner.call("POST", f"{base}/steps", body=body, headers=key)
        assert sent.status == 202, sent.body
        assert sent.body == {
            "session_id": sid,
            "command_id": "press-tab-1",
            "state": "pending",
            "answer": None,
            "takeover": None,  # no person holds the page (docs/api.md, "Take over a page")
        }
        assert sent.headers["Location"].endswith(f"{base}/commands/press-tab-1")
        again = owner.call("POST", f"{base}/steps", body=body, headers=key)
        assert (again.status, again.body) == (202, sent.body)  # the same command, not a new one
        read = owner.call("GET", f"{base}/commands/press-tab-1")
        assert (read.status, read.body["state"]) == (200, "pending")
        # A read that would wait for a running command's answer holds nothing for a
        # pending one (the session is starting): answered as it stands.
        waits = owner.call("GET", f"{base}/commands/press-tab-1", query="wait_s=25")
        assert (waits.status, waits.body) == (200, read.body)
        too_long = owner.call("GET", f"{base}/commands/press-tab-1", query="wait_s=26")
        assert too_long.status == 422 and too_long.error["field"] == "wait_s", too_long.body

        other = {**body, "step": {"action": "press", "selector": "a", "key": "Enter"}}
        reused = owner.call("POST", f"{base}/steps", body=other, headers=key)
        assert reused.status == 409 and reused.error["field"] == "command_id"
        differ = owner.call("POST", f"{base}/steps", body={**body, "command_id": "x"}, headers=key)
        assert differ.status == 422 and differ.error["field"] == "command_id"
        bad = owner.call("POST", f"{base}/steps", body={**body, "wait_s": 26})
        assert bad.status == 422 and bad.error["field"] == "wait_s"
        assert owner.call("GET", f"{base}/commands/never-sent").status == 404
        assert stranger.call("GET", f"{base}/commands/press-tab-1").status == 404
    finally:
        owner.call("DELETE", base)
    # The session ended before its worker took the command: it never runs.
    ended = owner.call("GET", f"{base}/commands/press-tab-1")
    assert ended.body["state"] == "expired"
    assert ended.body["answer"]["ok"] is False
    assert ended.body["answer"]["error"]["kind"] == "expired"


def test_a_use_session_never_saved_or_expired_is_a_422_at_open(
    owner: ApiCaller, api_env: Provisioned
) -> None:
    archive = SessionArchive(boto3.client("s3"), api_env.artifacts_bucket)
    now = time.time()
    archive.save("sessions-a", "shop-login", {"cookies": []}, ttl_s=3600, now=now)
    archive.save("sessions-a", "old-login", {"cookies": []}, ttl_s=60, now=now - 120)
    for name, why in (("never-saved", "does not exist"), ("old-login", "has expired")):
        refused = owner.call("POST", "/v1/browser-sessions", body={"use_session": name})
        assert refused.status == 422, refused.body
        assert refused.error["field"] == "use_session" and why in refused.error["message"]
    assert owner.call("GET", "/v1/jobs").body["jobs"] == []  # no slot taken, nothing queued
    opened = owner.call("POST", "/v1/browser-sessions", body={"use_session": "shop-login"})
    assert opened.status == 201, opened.body
    owner.call("DELETE", f"/v1/browser-sessions/{opened.body['session_id']}")


def test_a_step_to_a_session_deleted_while_it_runs_is_a_409(owner: ApiCaller) -> None:
    """Its worker winds it down and answers nothing: the step is refused at once as closed,
    not left to its wait (the worker is played: claimed, then never answering)."""
    from functions.api import app as api_app

    sid = owner.call("POST", "/v1/browser-sessions", body={"idle_timeout_s": 60}).body["session_id"]
    now = int(utcnow().timestamp())
    api_app.services().store.claim(
        "sessions-a", sid, owner="w1", lease_until=now + 120, now=now, started_at=iso(utcnow())
    )
    assert owner.call("GET", f"/v1/browser-sessions/{sid}").body["status"] == "ready"
    assert owner.call("DELETE", f"/v1/browser-sessions/{sid}").status == 200
    step = {"step": {"action": "press", "selector": "body", "key": "Tab"}, "wait_s": 1}
    refused = owner.call("POST", f"/v1/browser-sessions/{sid}/steps", body=step)
    assert refused.status == 409, refused.body
    assert refused.error["code"] == "session_ended" and "closed" in refused.error["message"]


def test_open_sessions_are_listed_for_their_tenant_only_and_bad_caps_are_a_422(
    owner: ApiCaller, stranger: ApiCaller
) -> None:
    opened = owner.call("POST", "/v1/browser-sessions", body={"max_cost_usd": 0.25, "name": "a"})
    assert opened.status == 201, opened.body
    sid = opened.body["session_id"]
    try:
        listed = owner.call("GET", "/v1/browser-sessions", query="status=starting")
        assert listed.status == 200, listed.body
        [view] = [s for s in listed.body["sessions"] if s["session_id"] == sid]
        assert (view["status"], view["max_cost_usd"]) == ("starting", 0.25)
        assert 0 < view["cost_usd"] < 0.001  # no browser yet: the platform's share only
        assert owner.call("GET", "/v1/browser-sessions", query="status=ready").body == {
            "sessions": []
        }
        assert stranger.call("GET", "/v1/browser-sessions").body == {"sessions": []}
        bad = owner.call("GET", "/v1/browser-sessions", query="status=closed")
        assert bad.status == 422 and bad.error["field"] == "status"
        for cap in (0, -1, 1000, 1e-9):
            refused = owner.call("POST", "/v1/browser-sessions", body={"max_cost_usd": cap})
            assert refused.status == 422, (cap, refused.body)
            assert refused.error["field"] == "max_cost_usd"
    finally:
        owner.call("DELETE", f"/v1/browser-sessions/{sid}")
    assert owner.call("GET", "/v1/browser-sessions").body == {"sessions": []}
