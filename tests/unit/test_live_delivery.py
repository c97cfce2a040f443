"""Live delivery on fakes: one events message per job per second, the per-connection cap
with coalescing (nothing dropped), gone connections forgotten. Time is a fake clock that
only the delivery's own waits move, so every assertion is about recorded send times."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from devstack.fakes import FakeClock
from devstack.fakes.live import FakeConnections, FakePoster
from pagefleet.jobs.changes import EventsWritten, JobChange
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.live.delivery import LiveDelivery, compose
from pagefleet.live.messages import MESSAGE_MAX_BYTES, dumps

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://x/"}]})


def job(job_id: str, status: JobStatus, tenant: str = "t", **extra: Any) -> JobRecord:
    return JobRecord(
        tenant_id=tenant,
        job_id=job_id,
        status=status,
        request=REQUEST,
        created_at="2027-01-15T08:00:00.000Z",
        updated_at="2027-01-15T08:00:01.000Z",
        correlation_id="c",
        pool="standard",
        attempt=1,
        **extra,
    )


def change(job_id: str, old: JobStatus | None, new: JobStatus, seq: int, **kw: Any) -> JobChange:
    return JobChange(
        old=job(job_id, old) if old else None,
        new=job(job_id, new, **kw),
        sequence=str(seq),
        written_at=1_800_000_000.5,
    )


def written(job_id: str, seqs: range, seq: int, tenant: str = "t") -> EventsWritten:
    events = [{"seq": s, "at": "2027-01-15T08:00:00.000Z", "type": "log"} for s in seqs]
    return EventsWritten(tenant, job_id, events, str(seq))


class Harness:
    def __init__(self, cap: int = 10) -> None:
        self.clock = FakeClock(1_800_000_000.2)
        self.connections = FakeConnections()
        self.poster = FakePoster()
        self.sleeps: list[float] = []

        def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.clock.advance(seconds)

        self.delivery = LiveDelivery(
            self.connections, self.poster, messages_per_s=cap, clock=self.clock, sleep=sleep
        )

    def follow(self, cid: str, room: str, tenant: str = "t") -> None:
        self.connections.open(cid, tenant_id=tenant, key_id="k", now=0, expires_at=10**10)
        self.connections.subscribe(cid, room, max_rooms=100)

    def received(self, cid: str) -> list[dict[str, Any]]:
        """What the client sees, batches unpacked, each with the window it counted against."""
        out = []
        for message in self.poster.messages(cid):
            inner = message["messages"] if message["type"] == "batch" else [message]
            out += [{**m, "window": message["window"]} for m in inner]
        return out

    def posts_per_window(self, cid: str) -> Counter[int]:
        return Counter(m["window"] for m in self.poster.messages(cid))


def test_a_batch_becomes_one_events_message_per_job_then_its_statuses() -> None:
    messages = compose(
        [
            change("j1", JobStatus.QUEUED, JobStatus.RUNNING, 1),
            change(
                "j1",
                JobStatus.RUNNING,
                JobStatus.FAILED,
                9,
                error=JobError(kind="step_failed", message="no #buy"),
            ),
        ],
        [
            written("j1", range(1, 4), 3),
            written("j1", range(4, 6), 5),
            written("j2", range(1, 2), 6),
        ],
    )
    j1 = [m.body for m in messages[("t", "j1")]]
    assert [m["type"] for m in j1] == ["status", "events", "status"]
    assert [e["seq"] for e in j1[1]["events"]] == [1, 2, 3, 4, 5] and j1[1]["next_after"] == 5
    assert j1[2]["status"] == "failed" and j1[2]["final"] is True
    assert j1[2]["error"]["message"] == "no #buy" and j1[2]["written_at"] == 1_800_000_000.5
    assert [m.body["type"] for m in messages[("t", "j2")]] == ["events"]


def test_followers_get_their_jobs_and_others_nothing() -> None:
    h = Harness()
    h.follow("mine", "j1")
    h.follow("console", "*")
    h.follow("elsewhere", "j2")
    h.follow("other-tenant", "*", tenant="other")
    h.delivery.handle_batch(
        [change("j1", JobStatus.QUEUED, JobStatus.RUNNING, 2)], [written("j1", range(1, 3), 1)]
    )
    assert [m["type"] for m in h.received("mine")] == ["events", "status"]
    assert [m["type"] for m in h.received("console")] == ["events", "status"]
    assert h.received("elsewhere") == [] and h.received("other-tenant") == []


def test_at_most_one_events_message_per_job_per_second() -> None:
    h = Harness()
    h.follow("c", "j1")
    h.delivery.handle_batch([], [written("j1", range(1, 3), 1)])
    h.delivery.handle_batch([], [written("j1", range(3, 5), 2)])  # same second
    h.delivery.handle_batch([change("j1", JobStatus.RUNNING, JobStatus.SUCCEEDED, 3)], [])
    got = h.received("c")
    events = [m for m in got if m["type"] == "events"]
    assert [m["window"] for m in events] == [1_800_000_000, 1_800_000_001]
    assert [e["seq"] for m in events for e in m["events"]] == [1, 2, 3, 4]
    assert got[-1]["type"] == "status" and got[-1]["status"] == "succeeded"
    assert h.sleeps == [pytest.approx(0.8)]
    posted = h.poster.messages("c")
    # Sent in the invocation that got them, or held back by the rule, and saying so.
    assert posted[0]["sent_at"] == posted[0]["received_at"] and "held_s" not in posted[0]
    assert [int(p["sent_at"]) for p in posted] == [p["window"] for p in posted]
    assert posted[1]["held_s"] == pytest.approx(0.8)
    assert posted[1]["sent_at"] - posted[1]["received_at"] == pytest.approx(0.8)


def test_a_jobs_status_never_overtakes_its_events() -> None:
    h = Harness()
    h.follow("c", "j1")
    h.delivery.handle_batch([], [written("j1", range(1, 3), 1)])
    # The job's last events and its final status, in one batch within the same second.
    h.delivery.handle_batch(
        [change("j1", JobStatus.RUNNING, JobStatus.SUCCEEDED, 3)], [written("j1", range(3, 5), 2)]
    )
    got = h.received("c")
    assert [(m["type"], m["window"]) for m in got] == [
        ("events", 1_800_000_000),
        ("events", 1_800_000_001),
        ("status", 1_800_000_001),
    ]


def test_the_per_connection_cap_holds_under_a_burst_and_nothing_is_dropped() -> None:
    h = Harness(cap=10)
    h.follow("console", "*")
    statuses = [change(f"j{n:02d}", JobStatus.QUEUED, JobStatus.RUNNING, n) for n in range(1, 31)]
    events = [written(f"j{n:02d}", range(1, 3), 100 + n) for n in range(1, 31)]
    for part in range(3):  # three invocations in the same second
        h.delivery.handle_batch(
            statuses[part * 10 : part * 10 + 10], events[part * 10 : part * 10 + 10]
        )
    assert max(h.posts_per_window("console").values()) <= 10
    got = h.received("console")
    assert Counter(m["type"] for m in got) == {"status": 30, "events": 30}
    assert {m["job_id"] for m in got} == {f"j{n:02d}" for n in range(1, 31)}
    assert any(m["type"] == "batch" for m in h.poster.messages("console"))  # coalesced
    # Per job: its events before its status, as written.
    for n in range(1, 31):
        mine = [m["type"] for m in got if m["job_id"] == f"j{n:02d}"]
        assert mine == ["events", "status"] or mine == ["status", "events"]


def test_a_gone_connection_is_forgotten() -> None:
    h = Harness()
    h.follow("gone", "j1")
    h.follow("here", "j1")
    h.poster.gone.add("gone")
    h.delivery.handle_batch([change("j1", JobStatus.QUEUED, JobStatus.RUNNING, 1)], [])
    assert h.connections.get("gone") is None
    assert [c.connection_id for c in h.connections.followers("t", ["j1"]).get("j1", [])] == ["here"]
    assert len(h.received("here")) == 1


def test_a_message_too_big_for_api_gateway_says_where_the_rest_is() -> None:
    h = Harness()
    h.follow("c", "j1")
    big = [
        {"seq": s, "at": "2027-01-15T08:00:00.000Z", "type": "console", "message": "x" * 1900}
        for s in range(1, 301)
    ]
    h.delivery.handle_batch([], [EventsWritten("t", "j1", big, "1")])
    (raw,) = [d for _, d in h.poster.posted]
    assert len(raw) <= MESSAGE_MAX_BYTES
    message = json.loads(raw)
    kept = [e["seq"] for e in message["events"]]
    assert kept == list(range(1, len(kept) + 1)) and 0 < len(kept) < 300
    assert message["more"] is True and message["next_after"] == kept[-1]
    assert len(dumps(message)) <= MESSAGE_MAX_BYTES


def test_one_broken_connection_does_not_keep_the_others_waiting() -> None:
    h = Harness()
    h.follow("broken", "j1")
    h.follow("fine", "j1")

    class Broken(FakePoster):
        def post(self, connection_id: str, data: bytes) -> bool:
            if connection_id == "broken":
                raise RuntimeError("500 from the management API")
            return super().post(connection_id, data)

    h.delivery.poster = h.poster = Broken()
    with pytest.raises(RuntimeError, match="500"):
        h.delivery.handle_batch([change("j1", JobStatus.QUEUED, JobStatus.RUNNING, 1)], [])
    assert [m["status"] for m in h.received("fine")] == ["running"]
