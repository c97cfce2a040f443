"""The WebSocket routes' service on fakes: connect by key or ticket, follow with an ownership
check, catch up with ``after``, leave, and the idle reaper."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstack.fakes import FakeClock, FakeTenantStore, fake_services
from devstack.fakes.live import FakeConnections, FakeEventStore, FakePoster
from pagefleet.errors import Unauthorized
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.service import submit_job
from pagefleet.live import service
from pagefleet.live.service import LiveServices, issue_ticket
from pagefleet.tenancy.api_keys import create_api_key, revoke_key

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://x/"}]})


class World:
    def __init__(self) -> None:
        self.clock = FakeClock(1_800_000_000)
        self.jobs = fake_services(self.clock)
        self.tenants = FakeTenantStore()
        self.connections = FakeConnections()
        self.poster = FakePoster()
        self.events = FakeEventStore()
        self.live = LiveServices(
            connections=self.connections,
            poster=self.poster,
            jobs=self.jobs.store,
            events=self.events,
            tenants=self.tenants,
            idle_unsubscribed_s=60,
            max_rooms=3,
            clock=self.clock,
        )
        self.key_a, self.record_a = create_api_key(self.tenants, "tenant-a")
        self.key_b, _ = create_api_key(self.tenants, "tenant-b")

    def connect(self, cid: str, key: str) -> None:
        service.connect(self.live, cid, authorization=f"Bearer {key}", ticket=None)

    def send(self, cid: str, action: str, **body: Any) -> dict[str, Any]:
        text = json.dumps({"action": action, **body})
        if action == "subscribe":
            return service.subscribe(self.live, cid, text)
        return service.unsubscribe(self.live, cid, text)


@pytest.fixture
def world() -> World:
    return World()


def test_a_key_or_a_ticket_opens_a_connection(world: World) -> None:
    world.connect("c1", world.key_a)
    assert world.connections.get("c1").tenant_id == "tenant-a"  # type: ignore[union-attr]
    ticket, expires = issue_ticket(
        world.connections, tenant_id="tenant-a", key_id=world.record_a.key_id, now=world.clock.t
    )
    assert expires == world.clock.t + 60
    service.connect(world.live, "c2", authorization=None, ticket=ticket)
    assert world.connections.get("c2").tenant_id == "tenant-a"  # type: ignore[union-attr]
    with pytest.raises(Unauthorized, match="used or expired"):
        service.connect(world.live, "c3", authorization=None, ticket=ticket)  # single use


@pytest.mark.parametrize(
    "authorization", [None, "", "Bearer", "Bearer pf_unknown", "Basic abc", "pf_no_scheme"]
)
def test_no_valid_key_no_connection(world: World, authorization: str | None) -> None:
    with pytest.raises(Unauthorized):
        service.connect(world.live, "c1", authorization=authorization, ticket=None)
    assert world.connections.get("c1") is None


def test_expired_tickets_and_tickets_of_revoked_keys_are_refused(world: World) -> None:
    old, _ = issue_ticket(
        world.connections, tenant_id="tenant-a", key_id=world.record_a.key_id, now=world.clock.t
    )
    world.clock.advance(60)
    with pytest.raises(Unauthorized):
        service.connect(world.live, "c1", authorization=None, ticket=old)
    fresh, _ = issue_ticket(
        world.connections, tenant_id="tenant-a", key_id=world.record_a.key_id, now=world.clock.t
    )
    revoke_key(world.tenants, "tenant-a", world.record_a.key_id)
    with pytest.raises(Unauthorized, match="revoked"):
        service.connect(world.live, "c1", authorization=None, ticket=fresh)
    with pytest.raises(Unauthorized):
        world.connect("c1", world.key_a)


def test_following_a_job_answers_its_status_at_once(world: World) -> None:
    job = submit_job(world.jobs, "tenant-a", REQUEST).job
    world.connect("c1", world.key_a)
    answer = world.send("c1", "subscribe", job_id=job.job_id)
    assert answer["type"] == "status" and answer["status"] == "queued"
    assert answer["job_id"] == job.job_id and answer["subscribed"] is True
    assert [
        c.connection_id
        for c in world.connections.followers("tenant-a", [job.job_id]).get(job.job_id, [])
    ] == ["c1"]


def test_another_tenants_job_is_not_found_and_joins_nothing(world: World) -> None:
    job = submit_job(world.jobs, "tenant-a", REQUEST).job
    world.events.put(
        "tenant-a", job.job_id, [{"seq": 1, "at": "x", "type": "log"}], expires_at=2**40, attempt=1
    )
    world.connect("intruder", world.key_b)
    answer = world.send("intruder", "subscribe", job_id=job.job_id, after=0)
    assert answer == {
        "type": "error",
        "code": "not_found",
        "message": "no such job",
        "job_id": job.job_id,
    }
    assert world.connections.followers("tenant-a", [job.job_id]).get(job.job_id, []) == []
    assert world.poster.posted == []  # nothing else was sent
    assert world.send("intruder", "subscribe", job_id="0" * 26)["code"] == "not_found"


def test_a_late_follower_catches_up_from_after(world: World) -> None:
    job = submit_job(world.jobs, "tenant-a", REQUEST).job
    events = [{"seq": s, "at": "x", "type": "log", "message": str(s)} for s in range(1, 6)]
    world.events.put("tenant-a", job.job_id, events, expires_at=2**40, attempt=1)
    world.connect("c1", world.key_a)
    answer = world.send("c1", "subscribe", job_id=job.job_id, after=2)
    (caught_up,) = world.poster.messages("c1")
    assert caught_up["type"] == "events" and [e["seq"] for e in caught_up["events"]] == [3, 4, 5]
    assert answer["type"] == "status"  # the status answers after the events


def test_all_jobs_room_leaving_and_limits(world: World) -> None:
    world.connect("c1", world.key_a)
    assert world.send("c1", "subscribe", jobs="all") == {"type": "subscribed", "jobs": "all"}
    assert [
        c.connection_id for c in world.connections.followers("tenant-a", ["any"]).get("any", [])
    ] == ["c1"]
    assert world.send("c1", "unsubscribe", jobs="all") == {"type": "unsubscribed", "jobs": "all"}
    assert world.send("c1", "unsubscribe", jobs="all")["code"] == "not_subscribed"
    jobs = [submit_job(world.jobs, "tenant-a", REQUEST).job.job_id for _ in range(4)]
    for job_id in jobs[:3]:
        assert world.send("c1", "subscribe", job_id=job_id)["type"] == "status"
    assert world.send("c1", "subscribe", job_id=jobs[3])["code"] == "too_many_subscriptions"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        json.dumps({"action": "subscribe"}),
        json.dumps({"action": "subscribe", "job_id": "x", "jobs": "all"}),
        json.dumps({"action": "subscribe", "job_id": "../../etc"}),
        json.dumps({"action": "subscribe", "job_id": "abc", "after": -1}),
    ],
)
def test_invalid_messages_get_an_error(world: World, body: str) -> None:
    world.connect("c1", world.key_a)
    assert service.subscribe(world.live, "c1", body)["code"] == "invalid_request"


def test_connections_following_nothing_are_closed_after_the_idle_time(world: World) -> None:
    job = submit_job(world.jobs, "tenant-a", REQUEST).job
    world.connect("idle", world.key_a)
    world.connect("busy", world.key_a)
    world.send("busy", "subscribe", job_id=job.job_id)
    world.clock.advance(30)
    world.connect("young", world.key_a)
    world.clock.advance(31)
    assert service.reap_idle(world.live) == ["idle"]
    assert world.poster.closed == ["idle"] and world.connections.get("idle") is None
    assert world.connections.get("busy") is not None
    world.send("busy", "unsubscribe", job_id=job.job_id)
    world.clock.advance(61)
    assert sorted(service.reap_idle(world.live)) == ["busy", "young"]
