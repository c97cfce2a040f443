"""The follow protocol (pure) and its polling driver on a fake API: order, no duplicates,
gaps filled from the events route, the final status last; the CLI's lines and exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from pagefleet.api.jobs import EventPage, JobView
from pagefleet.api.live import LiveInfo
from pagefleet.cli.follow import EXIT_BY_STATUS, describe
from pagefleet.client.follow import Follower, FollowNotFound, StatusUpdate, _fill, follow
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import RunEvent


def ev(seq: int, kind: str = "log", **extra: Any) -> dict[str, Any]:
    return {"seq": seq, "at": "2027-01-15T08:00:00.000Z", "type": kind, **extra}


def status(name: str, at: str, final: bool = False, job_id: str = "j1") -> dict[str, Any]:
    return {
        "type": "status",
        "job_id": job_id,
        "status": name,
        "final": final,
        "attempt": 1,
        "updated_at": at,
    }


def test_messages_become_items_once_and_in_order() -> None:
    f = Follower("j1")
    items = f.on_message(
        {
            "type": "batch",
            "messages": [
                status("running", "2027-01-15T08:00:01.000Z"),
                {"type": "events", "job_id": "j1", "events": [ev(2), ev(1)]},
                {"type": "events", "job_id": "other", "events": [ev(9)]},
            ],
        }
    )
    assert [type(i).__name__ for i in items] == ["StatusUpdate", "RunEvent", "RunEvent"]
    assert [i.seq for i in items if isinstance(i, RunEvent)] == [1, 2]
    # Redelivered: nothing new. An older status after a newer one: ignored.
    assert f.on_message({"type": "events", "job_id": "j1", "events": [ev(1), ev(2)]}) == []
    assert f.on_message(status("running", "2027-01-15T08:00:01.000Z")) == []
    assert f.on_message(status("queued", "2027-01-15T08:00:00.000Z")) == []
    assert not f.gap


def test_gaps_and_the_final_status_are_left_to_the_driver() -> None:
    f = Follower("j1", last_seq=3)
    f.on_message({"type": "events", "job_id": "j1", "events": [ev(4)], "more": True})
    assert f.gap and f.last_seq == 4
    f.gap = False
    f.on_message({"type": "events", "job_id": "j1", "events": [ev(7)]})  # 5 and 6 missing
    assert f.gap
    assert f.on_message(status("succeeded", "2027-01-15T08:00:05.000Z", final=True)) == []
    assert f.done and f.final is not None and f.final.status is JobStatus.SUCCEEDED


def test_events_missed_over_the_socket_are_read_from_the_route_not_skipped() -> None:
    """The socket brings 1, 2, then 5: 3 and 4 are stored but were not delivered (a stream
    range sent to the failure destination, a message lost). The gap is filled from the last
    event seen, so 3, 4 and 5 come once each and in order; a number never stored (6) is
    read past."""
    api = FakeApi([])
    api.stored = [ev(n) for n in (1, 2, 3, 4, 5, 7)]
    f = Follower("j1")
    seen = f.on_message({"type": "events", "job_id": "j1", "events": [ev(1), ev(2)]})
    seen += f.on_message({"type": "events", "job_id": "j1", "events": [ev(5)]})
    assert f.gap
    seen += list(_fill(api, f))
    seen += f.on_message({"type": "events", "job_id": "j1", "events": [ev(5), ev(7)]})
    assert [i.seq for i in seen if isinstance(i, RunEvent)] == [1, 2, 3, 4, 5, 7]
    assert not f.gap


def test_a_first_event_after_the_start_is_read_from_the_route_with_those_before_it() -> None:
    """A follower's socket brings a later attempt's event first (33) while the catch-up of
    the first attempt's (1-8) is still on its way, or was dropped with the socket: the events
    before it are read from the route, not skipped as seen (the chaos bench met it)."""
    api = FakeApi([])
    api.stored = [ev(n) for n in (*range(1, 9), 33)]
    f = Follower("j1")
    assert f.on_message({"type": "events", "job_id": "j1", "events": [ev(33)]}) == []
    assert f.gap and f.last_seq == 0
    seen = list(_fill(api, f))
    late_catch_up = {"type": "events", "job_id": "j1", "events": [ev(n) for n in range(1, 9)]}
    assert f.on_message(late_catch_up) == []
    assert [i.seq for i in seen if isinstance(i, RunEvent)] == [*range(1, 9), 33]


def test_not_found_is_an_error() -> None:
    with pytest.raises(FollowNotFound):
        Follower("j1").on_message({"type": "error", "code": "not_found", "job_id": "j1"})


class FakeApi:
    """The three reads of the polling driver, telling a job's story poll by poll."""

    def __init__(self, story: list[tuple[list[dict[str, Any]], str]]) -> None:
        self.story = story
        self.stored: list[dict[str, Any]] = []
        self.polls = 0

    def live_info(self) -> LiveInfo:
        return LiveInfo(url=None, idle_timeout_s=600, max_age_s=7200, ping_interval_s=300)

    def events(self, job_id: str, after: int = 0, limit: int = 100) -> EventPage:
        page = [e for e in self.stored if e["seq"] > after][:2]  # small pages: more pages
        more = len([e for e in self.stored if e["seq"] > after]) > 2
        return EventPage.model_validate(
            {"job_id": job_id, "events": page, "next_after": after, "more": more}
        )

    def get(self, job_id: str) -> JobView:
        new, state = self.story[min(self.polls, len(self.story) - 1)]
        self.polls += 1
        self.stored += new
        return JobView.model_validate(
            {"job_id": job_id, "status": state, "attempt": 1, "updated_at": f"t{self.polls:03d}"}
        )


def test_polling_yields_everything_in_order_and_the_final_status_last() -> None:
    api = FakeApi(
        [
            ([], "queued"),
            ([ev(1, "step_started", index=0), ev(2, "step_finished", index=0)], "running"),
            ([ev(3), ev(4), ev(5)], "running"),
            ([ev(6, "state", status="failed")], "failed"),
        ]
    )
    items = list(follow(api, "j1", poll_s=0))
    kinds = [(type(i).__name__, getattr(i, "seq", None) or i.status.value) for i in items]  # type: ignore[union-attr]
    assert kinds == [
        ("StatusUpdate", "queued"),
        ("StatusUpdate", "running"),
        ("RunEvent", 1),
        ("RunEvent", 2),
        ("RunEvent", 3),
        ("RunEvent", 4),
        ("RunEvent", 5),
        ("RunEvent", 6),
        ("StatusUpdate", "failed"),
    ]


def test_the_cli_lines_and_exit_codes() -> None:
    started = RunEvent.model_validate(ev(1, "step_started", index=0, of=3, label="goto https://x"))
    failed = RunEvent.model_validate(
        ev(
            2,
            "step_finished",
            index=2,
            of=3,
            action="click",
            duration_ms=500,
            outcome="failed",
            message="no [b]#buy",
            cost_usd=0.0000034,
        )
    )
    assert describe(started) == "step 1/3 [cyan]goto https://x[/]"
    line = describe(failed)
    assert line is not None and "step 3/3" in line and "(500 ms, $0.0000034)" in line
    assert "\\[b]" in line
    retry = RunEvent.model_validate(ev(3, "retry", reason="503 from target", delay_s=4))
    assert describe(retry) == "[yellow]retry in 4 s[/]: 503 from target"
    update = StatusUpdate(job_id="j1", status=JobStatus.RUNNING, final=False, attempt=2)
    assert describe(update) == "[bold]running[/] (attempt 2)"
    assert EXIT_BY_STATUS[JobStatus.SUCCEEDED] == 0
    codes = [EXIT_BY_STATUS[s] for s in JobStatus if s in EXIT_BY_STATUS]
    assert len(set(codes)) == len(codes) == 7  # one distinct code per way a job ends
    assert EXIT_BY_STATUS[JobStatus.NEEDS_REVIEW] == 9
    checkpoint = RunEvent.model_validate(
        ev(4, "checkpoint", index=4, of=8, label="Place order", state="done", how="checked")
    )
    assert describe(checkpoint) == "  [bold]◆[/] step 5/8 Place order: [bold]done[/] (checked)"
