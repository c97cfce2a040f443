"""Nothing a browser session held is left once it ended, whichever way (issue 32, "nothing
left behind"): one sweeper pass gives back the running slot of a session whose final move's
give-back was lost (a worker or API killed between the final write and the give-back, a
throttled write the gate only logged), and one pass of the live reaper removes the
followers of a session that ended (each kept a WebSocket connection open until API
Gateway's 2 hours). Each pass counts what it removed as LeftoversRemoved (0 included), on
moto with the real handlers and EventBridge's scheduled event."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devstack.pollers import scheduled_event, sweeper_timer
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.tenant_counters import DynamoTenantCounters
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs import metrics_names
from pagefleet.specs.resources import claim_owner
from pagefleet.specs.settings import LiveSettings
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller

TENANT = "leftovers"
LEASE = 60


def leftovers_counted(out: str) -> list[float]:
    """The LeftoversRemoved values of the EMF lines printed (every pass publishes one)."""
    values = []
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        blob = json.loads(line)
        if metrics_names.LEFTOVERS_REMOVED in blob:
            assert blob["service"] == metrics_names.SESSIONS_SERVICE
            value = blob[metrics_names.LEFTOVERS_REMOVED]
            values.append(sum(value) if isinstance(value, list) else value)
    return values


@pytest.fixture
def env(api_env: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Iterator[Provisioned]:
    monkeypatch.setenv("PAGEFLEET_CONNECTIONS_TABLE", api_env.connections_table)
    monkeypatch.setenv("PAGEFLEET_LIVE_ENDPOINT", "http://127.0.0.1:9/live")  # never posted to
    RUNTIME.reset()
    yield api_env
    RUNTIME.reset()


@pytest.fixture
def owner(env: Provisioned) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(env.tenants_table), TENANT)
    return ApiCaller(key)


def services() -> JobServices:
    from functions.api import app as api_app

    return api_app.services()


def running_slots() -> frozenset[str]:
    counters = DynamoTenantCounters(
        RUNTIME.client("dynamodb"), RUNTIME.settings(LiveSettings).tenants_table
    )
    return counters.view(TENANT, now_ms=int(time.time() * 1000)).running


def open_and_claim(owner: ApiCaller, worker: str = "w1") -> JobRecord:
    """Open a session and claim it as a worker's slot does (the gate takes its slot)."""
    opened = owner.call("POST", "/v1/browser-sessions", body={"idle_timeout_s": 60})
    assert opened.status == 201, opened.body
    svc = services()
    for _ in range(20):
        got = svc.queue.receive("standard", max_messages=1, wait_seconds=1, visibility=LEASE)
        if got and got[0].message and got[0].message.job_id == opened.body["session_id"]:
            break
    else:
        raise AssertionError("the session's message never came")
    taken = svc.lifecycle.claim(
        got[0],
        "standard",
        owner=claim_owner(worker, "c0ffee01"),
        lease_seconds=LEASE,
        worker=worker,
    )
    assert taken.job is not None, taken.reason
    assert taken.job.job_id in running_slots()
    return taken.job


def lost_give_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The final move's give-back never lands (its process killed after the final write,
    or the write refused: the gate logs it and goes on)."""

    def killed(self: DynamoTenantCounters, tenant_id: str, job_id: str) -> None:
        raise ConnectionError("the process was killed before its give-back")

    monkeypatch.setattr(DynamoTenantCounters, "give_back", killed)


def end_by_worker(status: JobStatus, reason: str) -> Callable[[ApiCaller, JobRecord], None]:
    def end(owner: ApiCaller, job: JobRecord) -> None:
        outcome = Outcome(status, result={"step_count": 0, "data": {}, "closed_reason": reason})
        services().lifecycle.finish(job, outcome, "w1")

    return end


def lost_to_the_api(owner: ApiCaller, job: JobRecord) -> None:
    # Its worker stopped heartbeating: the lease ran out, the API takes it back as it reads.
    svc = services()
    svc.store.extend_lease(
        TENANT, job.job_id, attempt=job.attempt, owner=job.lease_owner or "", lease_until=0
    )
    assert owner.call("GET", f"/v1/browser-sessions/{job.job_id}").body["status"] == "lost"


ENDINGS = {
    "closed": end_by_worker(JobStatus.SUCCEEDED, "closed"),
    "idle": end_by_worker(JobStatus.SUCCEEDED, "idle"),
    "max_duration": end_by_worker(JobStatus.TIMED_OUT, "max_duration"),
    "cancelled": end_by_worker(JobStatus.CANCELLED, "closed"),
    "lost": lost_to_the_api,
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_slot_an_ended_session_left_is_given_back_by_one_sweeper_pass(
    owner: ApiCaller,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ending: str,
) -> None:
    still_open = open_and_claim(owner, worker="w2")
    ended = open_and_claim(owner)
    with monkeypatch.context() as patch:
        lost_give_back(patch)
        ENDINGS[ending](owner, ended)
    assert services().store.get(TENANT, ended.job_id).status.is_final
    assert ended.job_id in running_slots()  # left behind: the tenant has one slot less

    capsys.readouterr()
    report: Any = sweeper_timer(interval_s=3600)._action()  # one EventBridge tick
    assert report["leftovers"]["slots_removed"] == 1
    assert running_slots() == {still_open.job_id}  # a session still open keeps its slot
    again: Any = sweeper_timer(interval_s=3600)._action()
    assert again["leftovers"]["slots_removed"] == 0 and again["leftovers"]["slots"] == 1
    assert leftovers_counted(capsys.readouterr().out) == [1.0, 0.0]


def test_followers_of_an_ended_session_are_removed_by_one_reaper_pass(
    owner: ApiCaller, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.live import handler as live
    from pagefleet.live import service as live_service

    # No wait in a test: the grace for the last events is the only thing skipped.
    monkeypatch.setattr(live_service, "ENDED_GRACE_S", 0)
    ended = open_and_claim(owner)
    still_open = open_and_claim(owner, worker="w2")
    connections = RUNTIME.live_services(RUNTIME.settings(LiveSettings)).connections
    now = time.time()
    for cid, rooms in {
        "console-tab": [ended.job_id],  # watched the session that ends: left behind
        "agent": [ended.job_id, still_open.job_id],  # and one still open
        "dashboard": ["*"],  # every job of the tenant: kept
    }.items():
        connections.open(cid, tenant_id=TENANT, key_id="k", now=now, expires_at=int(now) + 7200)
        for room in rooms:
            assert connections.subscribe(cid, room, max_rooms=10)
    end_by_worker(JobStatus.SUCCEEDED, "closed")(owner, ended)

    capsys.readouterr()
    first = live.handler(scheduled_event(), None)
    assert first["followers_removed"] == 2
    rooms = {cid: connections.get(cid).rooms for cid in ("console-tab", "agent", "dashboard")}  # type: ignore[union-attr]
    assert rooms == {
        "console-tab": frozenset(),
        "agent": frozenset({still_open.job_id}),
        "dashboard": frozenset({"*"}),
    }
    # Following nothing now: the reaper's idle clock runs for it (closed after
    # idle_unsubscribed_s), no longer held open by a session that is over.
    assert connections.idle(time.time() + 1) == ["console-tab"]
    assert connections.followers(TENANT, [ended.job_id]) == {
        ended.job_id: [connections.get("dashboard")]
    }
    second = live.handler(scheduled_event(), None)
    assert second["followers_removed"] == 0
    assert leftovers_counted(capsys.readouterr().out) == [2.0, 0.0]
