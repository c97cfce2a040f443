"""Taking over a running job's page through the API handler on moto (API Gateway events):
the owner takes it (shown on the job and the session, a run event, an audit record, a
wake-up of ids only to its worker's inbox), another key of the tenant is refused naming the
holder, input batches are recorded in order for the worker and push the time, a session's
step waits saying why, the page is handed back once; another tenant gets a 404 on every
route and nothing is written or sent; bad input is a 422 naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.takeover_inputs import DynamoTakeoverInputs
from pagefleet.jobs.models import iso, utcnow
from pagefleet.runtime import RUNTIME
from pagefleet.specs.resources import inbox_name
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller

WORKER = "w-takeover-1"
# A claim's owner is the worker's id and a token of the claim (browser_task.slot.worker).
OWNER = f"{WORKER}/ab12cd34"
FRAME = {"width": 960, "height": 640}
SECRET_TEXT = "my one-time code 424242"


def _caller(env: Provisioned, tenant: str) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(env.tenants_table), tenant)
    return ApiCaller(key)


@pytest.fixture
def inbox(api_env: Provisioned) -> Iterator[str]:
    """The worker's inbox (as it makes it at start), and its URL."""
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=inbox_name("dev", WORKER))["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def _received(url: str) -> list[dict[str, object]]:
    sqs = boto3.client("sqs")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def _running_session(owner: ApiCaller, tenant: str) -> str:
    from functions.api import app as api_app

    sid = str(
        owner.call("POST", "/v1/browser-sessions", body={"idle_timeout_s": 60}).body["session_id"]
    )
    now = int(utcnow().timestamp())
    api_app.services().store.claim(
        tenant, sid, owner=OWNER, lease_until=now + 300, now=now, started_at=iso(utcnow())
    )
    return sid


def test_the_owner_takes_over_types_and_hands_back_and_others_are_refused(
    api_env: Provisioned, inbox: str
) -> None:

    owner, colleague = _caller(api_env, "tk-a"), _caller(api_env, "tk-a")
    stranger = _caller(api_env, "tk-b")
    sid = _running_session(owner, "tk-a")
    base = f"/v1/jobs/{sid}/takeover"
    try:
        # Another tenant: a 404 on every route, and nothing written or sent.
        assert stranger.call("POST", base).status == 404
        batch = {"takeover_id": "0" * 26, "frame": FRAME, "events": [{"type": "text", "text": "x"}]}
        assert stranger.call("POST", f"{base}/input", body=batch).status == 404
        assert stranger.call("DELETE", base).status == 404
        assert owner.call("GET", f"/v1/jobs/{sid}").body["takeover"] is None
        assert _received(inbox) == []

        taken = owner.call("POST", base)
        assert taken.status == 200, taken.body
        takeover = taken.body["takeover"]
        assert taken.body["renewed"] is False and takeover["idle_s"] == 60
        assert takeover["holder"].startswith("tk-a:")
        tid = takeover["takeover_id"]
        assert owner.call("GET", f"/v1/jobs/{sid}").body["takeover"] == takeover
        assert owner.call("GET", f"/v1/browser-sessions/{sid}").body["takeover"] == takeover
        again = owner.call("POST", base)  # its holder again: renewed, the same takeover
        assert again.body["renewed"] is True and again.body["takeover"]["takeover_id"] == tid

        refused = colleague.call("POST", base)
        assert refused.status == 409 and refused.error["code"] == "taken_over"
        assert takeover["holder"] in refused.error["message"]

        # Input: recorded in order for the worker, the time pushed; bad input names its field.
        typed = {
            "takeover_id": tid,
            "frame": FRAME,
            "events": [{"type": "click", "x": 100, "y": 50}, {"type": "text", "text": SECRET_TEXT}],
        }
        first = owner.call("POST", f"{base}/input", body=typed)
        assert first.status == 202 and first.body["seq"] == 1, first.body
        enter = {"takeover_id": tid, "frame": FRAME, "events": [{"type": "key", "key": "Enter"}]}
        assert owner.call("POST", f"{base}/input", body=enter).body["seq"] == 2
        assert colleague.call("POST", f"{base}/input", body=enter).status == 409  # not its holder
        outside = {**typed, "events": [{"type": "click", "x": 961, "y": 5}]}
        bad = owner.call("POST", f"{base}/input", body=outside)
        assert bad.status == 422 and "outside the frame" in json.dumps(bad.body)
        unknown = owner.call("POST", f"{base}/input", body={**typed, "events": [{"type": "hover"}]})
        assert unknown.status == 422 and "events" in json.dumps(unknown.body)
        stored = DynamoTakeoverInputs(RUNTIME.client("dynamodb"), api_env.jobs_table)
        batches = stored.after("tk-a", sid, tid, seq=0)
        assert [b.seq for b in batches] == [1, 2]
        assert batches[0].events[1].text == SECRET_TEXT  # type: ignore[union-attr]

        # The worker was woken with ids only: what was typed is never in its inbox.
        wakeups = _received(inbox)
        assert [w["op"] for w in wakeups] == ["takeover", "takeover", "input", "input"]
        assert all(w["session_id"] == sid and w["takeover_id"] == tid for w in wakeups)
        assert SECRET_TEXT not in json.dumps(wakeups)

        # A session's step waits for the person, and says so.
        step = {"step": {"action": "press", "selector": "body", "key": "Tab"}, "wait_s": 0}
        waiting = owner.call("POST", f"/v1/browser-sessions/{sid}/steps", body=step)
        assert waiting.status == 202 and waiting.body["state"] == "pending", waiting.body
        assert waiting.body["takeover"]["takeover_id"] == tid
        # Its worker (the owner's worker, whatever the claim's token) is woken for it.
        assert [w["op"] for w in _received(inbox)] == ["command"]

        handed = owner.call("DELETE", base)
        assert handed.status == 200 and handed.body["handed_back"] is True
        assert handed.body["takeover"]["takeover_id"] == tid
        assert owner.call("DELETE", base).body == {
            "job_id": sid,
            "handed_back": False,
            "takeover": None,
        }
        late = owner.call("POST", f"{base}/input", body=enter)
        assert late.status == 409 and late.error["code"] == "takeover_not_held"
        assert owner.call("GET", f"/v1/jobs/{sid}").body["takeover"] is None

        events = owner.call("GET", f"/v1/jobs/{sid}/events").body["events"]
        moves = [(e["state"], e["holder"]) for e in events if e["type"] == "takeover"]
        assert moves == [("taken", takeover["holder"]), ("handed_back", takeover["holder"])]
        audit = RUNTIME.audit_log(api_env.tenants_table).recent(limit=20)
        mine = [
            (r.action, r.details.get("takeover_id"))
            for r in audit
            if r.target == sid and r.action.startswith("job.")
        ]
        assert mine == [("job.handed_back", tid), ("job.taken_over", tid)]  # newest first
    finally:
        owner.call("DELETE", f"/v1/browser-sessions/{sid}")


def test_only_a_running_job_has_a_page_to_take_over(api_env: Provisioned) -> None:
    owner = _caller(api_env, "tk-c")
    queued = owner.post_job({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
    job_id = queued.body["job_id"]
    refused = owner.call("POST", f"/v1/jobs/{job_id}/takeover")
    assert refused.status == 409 and "queued" in refused.error["message"], refused.body
    assert owner.get_job(job_id).body["takeover"] is None
    assert owner.call("POST", "/v1/jobs/not-an-id/takeover").status == 422


def test_pagefleet_hand_back_frees_a_forgotten_takeover(
    api_env: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another key of the tenant hands back a page its colleague forgot (the CLI)."""
    from typer.testing import CliRunner

    from pagefleet import cli
    from pagefleet.cli import jobs as cli_jobs
    from pagefleet.client import PagefleetClient
    from tests.support.api import gateway_transport

    owner, colleague = _caller(api_env, "tk-d"), _caller(api_env, "tk-d")
    sid = _running_session(owner, "tk-d")
    holder = owner.call("POST", f"/v1/jobs/{sid}/takeover").body["takeover"]["holder"]

    def through_gateway(api_url: str | None, api_key: str | None) -> PagefleetClient:
        return PagefleetClient("http://gateway.test", api_key, transport=gateway_transport())

    monkeypatch.setattr(cli_jobs, "api_client", through_gateway)
    env = {"PAGEFLEET_API_KEY": str(colleague.api_key), "COLUMNS": "200"}
    first = CliRunner().invoke(cli.app, ["hand-back", sid], env=env)
    assert first.exit_code == 0, first.output
    assert f"Handed back: {holder} no longer holds job {sid}." in first.output
    again = CliRunner().invoke(cli.app, ["hand-back", sid], env=env)
    assert again.exit_code == 0 and "No one held" in again.output
    assert owner.call("GET", f"/v1/jobs/{sid}").body["takeover"] is None
    owner.call("DELETE", f"/v1/browser-sessions/{sid}")
