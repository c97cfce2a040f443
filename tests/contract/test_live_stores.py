"""Run events and live connections: the fakes and the DynamoDB adapters, one suite."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from devstack.fakes.live import FakeConnections, FakeEventStore
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.connections import DynamoConnections
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.live.ports import Connection, Connections, EventStore, SubscriptionLimit, Ticket
from pagefleet.runtime import RUNTIME

NOW = 1_800_000_000
LATER = NOW + 3600
T = NOW + 0.125  # connections keep times to the millisecond


@pytest.fixture
def events(backend: str, request: pytest.FixtureRequest) -> EventStore:
    if backend == "fake":
        return FakeEventStore()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoEventStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)


@pytest.fixture
def connections(backend: str, request: pytest.FixtureRequest) -> Connections:
    if backend == "fake":
        return FakeConnections()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoConnections(RUNTIME.client("dynamodb"), provisioned.connections_table)


def _events(first: int, count: int, size: int = 10) -> list[dict[str, Any]]:
    return [
        {"seq": s, "at": "2027-01-15T08:00:00.000Z", "type": "log", "message": "x" * size}
        for s in range(first, first + count)
    ]


# --- run events ------------------------------------------------------------------------------
def test_sequence_numbers_are_handed_out_once(events: EventStore) -> None:
    first = events.allocate("t", "j1", count=3, bounded=2, expires_at=LATER)
    second = events.allocate("t", "j1", count=5, bounded=5, expires_at=LATER)
    other = events.allocate("t", "j2", count=1, bounded=1, expires_at=LATER)
    unbounded = events.allocate("t", "j1", count=1, bounded=0, expires_at=LATER)
    assert first == (1, 2)
    assert second == (4, 7)  # 4..8, and 7 bounded events reserved in all
    assert other == (1, 1)
    assert unbounded == (9, 7)  # a state event alone: a number, nothing of the bound


def test_events_page_in_order_after_a_sequence_number(events: EventStore) -> None:
    events.put("t", "j1", _events(1, 5), expires_at=LATER, attempt=1)
    events.put("t", "j1", _events(6, 5), expires_at=LATER, attempt=1)
    page, more = events.page("t", "j1", after=0, limit=100, now=NOW)
    assert [e["seq"] for e in page] == list(range(1, 11)) and not more
    page, more = events.page("t", "j1", after=3, limit=4, now=NOW)
    assert [e["seq"] for e in page] == [4, 5, 6, 7] and more
    page, more = events.page("t", "j1", after=7, limit=4, now=NOW)
    assert [e["seq"] for e in page] == [8, 9, 10] and not more
    assert events.page("t", "j1", after=10, limit=4, now=NOW) == ([], False)


def test_another_tenant_or_job_sees_none_of_them(events: EventStore) -> None:
    events.put("t", "j1", _events(1, 3), expires_at=LATER, attempt=1)
    assert events.page("other", "j1", after=0, limit=10, now=NOW) == ([], False)
    assert events.page("t", "j10", after=0, limit=10, now=NOW) == ([], False)


def test_a_large_batch_is_stored_whole_and_reads_back_in_order(events: EventStore) -> None:
    # 400 events of 2 KB: far more than one DynamoDB item holds.
    events.put("t", "j1", _events(1, 400, size=2000), expires_at=LATER, attempt=1)
    seen: list[int] = []
    after = 0
    while True:
        page, more = events.page("t", "j1", after=after, limit=150, now=NOW)
        seen += [e["seq"] for e in page]
        if not more:
            break
        after = page[-1]["seq"]
    assert seen == list(range(1, 401))


def test_writing_the_same_events_twice_changes_nothing(events: EventStore) -> None:
    events.put("t", "j1", _events(1, 3), expires_at=LATER, attempt=1)
    events.put("t", "j1", _events(1, 3), expires_at=LATER, attempt=1)
    page, _ = events.page("t", "j1", after=0, limit=10, now=NOW)
    assert [e["seq"] for e in page] == [1, 2, 3]


def test_expired_events_are_not_served(events: EventStore) -> None:
    events.put("t", "j1", _events(1, 3), expires_at=NOW + 10, attempt=1)
    assert len(events.page("t", "j1", after=0, limit=10, now=NOW)[0]) == 3
    assert events.page("t", "j1", after=0, limit=10, now=NOW + 10) == ([], False)


# --- connections -----------------------------------------------------------------------------
def _open(connections: Connections, cid: str, tenant: str = "t") -> None:
    connections.open(cid, tenant_id=tenant, key_id="k", now=T, expires_at=LATER)


def test_followers_of_a_job_are_found_by_room(connections: Connections) -> None:
    _open(connections, "c1")
    _open(connections, "c2")
    _open(connections, "c3", tenant="other")
    assert connections.subscribe("c1", "j1", max_rooms=10)
    assert connections.subscribe("c2", "*", max_rooms=10)
    assert connections.subscribe("c3", "*", max_rooms=10)
    assert {c.connection_id for c in connections.followers("t", ["j1"]).get("j1", [])} == {
        "c1",
        "c2",
    }
    assert {c.connection_id for c in connections.followers("t", ["j2"]).get("j2", [])} == {"c2"}
    assert {c.connection_id for c in connections.followers("other", ["j1"]).get("j1", [])} == {"c3"}
    found = connections.get("c1")
    assert found is not None and found.rooms == frozenset({"j1"}) and found.tenant_id == "t"


def test_followers_of_a_batch_of_jobs_are_found_at_once(connections: Connections) -> None:
    assert connections.followers("t", ["j1", "j2"]) == {}  # nobody ever followed anything
    _open(connections, "c1")
    _open(connections, "c2")
    _open(connections, "c3", tenant="other")
    connections.subscribe("c1", "j1", max_rooms=10)
    connections.subscribe("c3", "j2", max_rooms=10)  # another tenant's room of that name

    def ids(found: dict[str, list[Connection]]) -> dict[str, set[str]]:
        return {job: {c.connection_id for c in conns} for job, conns in found.items()}

    assert ids(connections.followers("t", ["j1", "j2", "j1"])) == {"j1": {"c1"}}
    connections.subscribe("c2", "*", max_rooms=10)
    assert ids(connections.followers("t", ["j1", "j2"])) == {"j1": {"c1", "c2"}, "j2": {"c2"}}
    connections.unsubscribe("c2", "*", now=T + 1)
    connections.close("c1")
    connections.close("c1")  # a second close counts nothing out twice
    assert connections.followers("t", ["j1", "j2"]) == {}
    connections.subscribe("c2", "j2", max_rooms=10)  # the counts still see a new follower
    assert ids(connections.followers("t", ["j1", "j2"])) == {"j2": {"c2"}}
    assert ids(connections.followers("other", ["j2"])) == {"j2": {"c3"}}


def test_rooms_per_connection_are_bounded(connections: Connections) -> None:
    _open(connections, "c1")
    assert connections.subscribe("c1", "j1", max_rooms=2)
    assert connections.subscribe("c1", "j2", max_rooms=2)
    assert connections.subscribe("c1", "j2", max_rooms=2)  # again: no new room
    with pytest.raises(SubscriptionLimit):
        connections.subscribe("c1", "j3", max_rooms=2)


def test_leaving_and_closing(connections: Connections) -> None:
    _open(connections, "c1")
    connections.subscribe("c1", "j1", max_rooms=10)
    assert connections.unsubscribe("c1", "j1", now=T + 5)
    assert not connections.unsubscribe("c1", "j1", now=T + 5)
    assert connections.followers("t", ["j1"]).get("j1", []) == []
    connections.subscribe("c1", "j1", max_rooms=10)
    connections.close("c1")
    connections.close("c1")  # twice is fine
    assert connections.get("c1") is None
    assert connections.followers("t", ["j1"]).get("j1", []) == []
    assert not connections.subscribe("c1", "j2", max_rooms=10)


def test_idle_connections_are_those_following_nothing(connections: Connections) -> None:
    _open(connections, "quiet")
    _open(connections, "busy")
    _open(connections, "left")
    connections.subscribe("busy", "j1", max_rooms=10)
    connections.subscribe("left", "j1", max_rooms=10)
    connections.unsubscribe("left", "j1", now=T + 100)
    assert connections.idle(since_before=T + 50.5) == ["quiet"]
    assert connections.idle(since_before=T) == []
    assert set(connections.idle(since_before=T + 100.001)) == {"quiet", "left"}
    found = connections.get("quiet")
    assert found is not None and found.connected_at == T


def test_the_send_window_is_shared_and_optimistic(connections: Connections) -> None:
    _open(connections, "c1")
    seen = connections.get("c1")
    assert seen is not None
    w = NOW + 7
    assert connections.reserve(seen, window=w, count=3, jobs=frozenset({"j1"}))
    # A writer that read before that reservation must read again.
    assert not connections.reserve(seen, window=w, count=1, jobs=frozenset())
    now = connections.get("c1")
    assert now is not None and (now.window, now.sent, now.window_jobs) == (w, 3, {"j1"})
    # The same job's events twice in one second: refused; another job's: fine.
    assert not connections.reserve(now, window=w, count=1, jobs=frozenset({"j1"}))
    assert connections.reserve(now, window=w, count=1, jobs=frozenset({"j2"}))
    again = connections.get("c1")
    assert again is not None and again.sent == 4
    # The next second starts a new window.
    assert connections.reserve(again, window=w + 1, count=1, jobs=frozenset({"j1"}))
    last = connections.get("c1")
    assert last is not None and (last.window, last.sent, last.window_jobs) == (w + 1, 1, {"j1"})
    stale = dataclasses.replace(again, window=w)
    assert not connections.reserve(stale, window=w + 1, count=1, jobs=frozenset())


def test_a_ticket_is_taken_once_and_only_while_valid(connections: Connections) -> None:
    connections.put_ticket("h1", Ticket("t", "k1"), expires_at=NOW + 60)
    connections.put_ticket("h2", Ticket("t", "k1"), expires_at=NOW + 60)
    assert connections.take_ticket("h1", now=NOW) == Ticket("t", "k1")
    assert connections.take_ticket("h1", now=NOW) is None
    assert connections.take_ticket("h2", now=NOW + 60) is None  # expired
    assert connections.take_ticket("nope", now=NOW) is None


def test_the_connections_following_any_room_are_listed_with_their_rooms(
    connections: Connections,
) -> None:
    for cid in ("a", "b", "idle"):
        _open(connections, cid, tenant="t" if cid != "b" else "u")
    assert connections.subscribe("a", "j1", max_rooms=5)
    assert connections.subscribe("a", "*", max_rooms=5)
    assert connections.subscribe("b", "j2", max_rooms=5)
    found = {c.connection_id: (c.tenant_id, c.rooms) for c in connections.following()}
    assert found == {"a": ("t", frozenset({"j1", "*"})), "b": ("u", frozenset({"j2"}))}
    assert connections.unsubscribe("b", "j2", now=T)
    assert [c.connection_id for c in connections.following()] == ["a"]
