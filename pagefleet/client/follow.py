"""Follow a job: its run events and status changes as they happen, until it ends.

``PagefleetClient.follow(job_id)`` (an iterator) and ``follow_async`` (an async iterator)
yield ``RunEvent`` and ``StatusUpdate`` items in order. They use the WebSocket API (the
address from ``GET /v1/live``, the API key as a Bearer header), ping it, reconnect with
``after=<last seq>`` when API Gateway closes the socket (10 minutes idle, 2 hours at most),
fill any gap from ``GET /v1/jobs/{id}/events``, and fall back to polling that route (and
``GET /v1/jobs/{id}``) when no socket can be opened. Events are never yielded twice; the
last item is the job's final ``StatusUpdate``.

The protocol handling (``Follower``) is pure; the sync and async drivers only do the I/O.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from pagefleet.jobs.record import JobError
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import RunEvent, ended

PING_EVERY_S = 240.0  # well inside API Gateway's 10-minute idle limit
RECONNECTS_MAX = 20


class StatusUpdate(BaseModel):
    """A state change of the job (the WebSocket's ``status`` message)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    status: JobStatus
    final: bool
    attempt: int = 0
    updated_at: str | None = None
    finished_at: str | None = None
    error: JobError | None = None


FollowItem = RunEvent | StatusUpdate


class FollowNotFound(Exception):
    """The job does not exist, or is another tenant's."""


@dataclass
class Follower:
    """What a follower knows: the last event seen, the last status, whether it is over."""

    job_id: str
    last_seq: int = 0
    status: StatusUpdate | None = None
    done: bool = False
    # Events are stored beyond what a message carried: read them from the events route.
    gap: bool = False
    # The final status, held back until the events before it are out.
    final: StatusUpdate | None = None
    _statuses: set[tuple[str, int]] = field(default_factory=set)

    def on_message(self, message: dict[str, Any]) -> list[FollowItem]:
        """The items a WebSocket message carries (batches unpacked); raises FollowNotFound."""
        kind = message.get("type")
        if kind == "batch":
            out: list[FollowItem] = []
            for inner in message.get("messages") or []:
                out += self.on_message(inner)
            return out
        if message.get("job_id") not in (None, self.job_id):
            return []  # another job (a shared connection)
        if kind == "events":
            items = self.on_events(message.get("events") or [])
            if message.get("more"):
                self.gap = True
            return list(items)
        if kind == "status":
            return self.on_status(message)
        if kind == "error":
            if message.get("code") == "not_found":
                raise FollowNotFound(f"job {self.job_id} not found")
            raise RuntimeError(f"live API error: {message.get('code')}: {message.get('message')}")
        return []  # pong, subscribed, unsubscribed

    def on_events(
        self, events: Iterable[dict[str, Any]], *, stored: bool = False
    ) -> list[FollowItem]:
        """``stored``: a page of the events route, every event kept after ``last_seq`` (a
        number it skips was never stored)."""
        out: list[FollowItem] = []
        for raw in sorted(events, key=lambda e: int(e["seq"])):
            event = RunEvent.model_validate(raw)
            if event.seq <= self.last_seq:
                continue  # seen already (a redelivered batch, a catch-up overlap)
            if event.seq > self.last_seq + 1 and not stored:
                # A number is missing: the driver reads on from the last one seen, and gets
                # this event after the missing ones (or after a number never stored). Before
                # any event too: a socket's first may be a later attempt's, its subscription's
                # catch-up of the earlier ones still on its way or dropped with the socket.
                self.gap = True
                break
            self.last_seq = event.seq
            out.append(event)
        return out

    def on_status(self, message: dict[str, Any]) -> list[FollowItem]:
        update = StatusUpdate.model_validate(message)
        key = (update.status.value, update.attempt)  # not updated_at: heartbeats move it
        if key in self._statuses or self.done:
            return []
        last = self.status.updated_at if self.status else None
        if last and update.updated_at and update.updated_at < last:
            return []  # an older change the stream delivered after a newer status
        self._statuses.add(key)
        self.status = update
        if update.final:
            self.done = True
            self.gap = True  # read what the socket may not have carried yet
            self.final = update
            return []  # the driver drains the events, then yields it last
        return [update]

    def on_job(self, job: Any) -> list[FollowItem]:
        """A job as ``GET /v1/jobs/{id}`` shows it (polling), as a status message."""
        return self.on_status(status_of(job))

    def subscribe_message(self) -> str:
        return json.dumps({"action": "subscribe", "job_id": self.job_id, "after": self.last_seq})


def status_of(job: Any) -> dict[str, Any]:
    """A ``JobView`` as the WebSocket's status message."""
    return {
        "type": "status",
        "job_id": job.job_id,
        "status": job.status.value,
        "final": ended(job.status),
        "attempt": job.attempt,
        "updated_at": job.updated_at,
        "finished_at": job.finished_at,
        "error": job.error.model_dump(mode="json") if job.error else None,
    }


# --- the synchronous driver -------------------------------------------------------------------
class SocketUnavailable(Exception):
    """No WebSocket could be opened (not deployed, refused, unreachable): poll instead."""


def follow(
    client: Any,
    job_id: str,
    *,
    after: int = 0,
    timeout: float | None = None,
    live: bool = True,
    poll_s: float = 1.0,
) -> Iterator[FollowItem]:
    """Yield the job's events and status changes until it ends (see the module's doc)."""
    follower = Follower(job_id, last_seq=after)
    deadline = None if timeout is None else time.monotonic() + timeout
    if live:
        url = client.live_info().url
        try:
            if url:
                yield from _over_socket(client, follower, url, deadline)
        except SocketUnavailable:
            pass
    if not follower.done:
        yield from _by_polling(client, follower, deadline, poll_s)
    yield from _fill(client, follower)
    assert follower.final is not None
    yield follower.final


def time_left(deadline: float | None, job_id: str) -> float:
    """Seconds to wait before the deadline (a ping period when there is none)."""
    if deadline is None:
        return PING_EVERY_S
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"job {job_id} did not end in time")
    return left


def _fill(client: Any, follower: Follower) -> Iterator[FollowItem]:
    """The events after the follower's last one, from the events route."""
    follower.gap = False
    while True:
        page = client.events(follower.job_id, after=follower.last_seq, limit=1000)
        yield from follower.on_events((e.wire() for e in page.events), stored=True)
        if not page.more:
            return


def _over_socket(
    client: Any, follower: Follower, url: str, deadline: float | None
) -> Iterator[FollowItem]:
    # websockets: +0.05 s on importing the client, for callers that never follow a job.
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
    from websockets.sync.client import connect

    headers = {"Authorization": f"Bearer {client.api_key}"}
    for _ in range(RECONNECTS_MAX):
        try:
            socket = connect(url, additional_headers=headers, open_timeout=10, proxy=None)
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise SocketUnavailable(str(exc)) from exc
        with socket:
            # With after=<last seq>: what happened since comes first (a reconnect resumes).
            socket.send(follower.subscribe_message())
            pinged = time.monotonic()
            while not follower.done:
                wait = min(
                    time_left(deadline, follower.job_id), PING_EVERY_S - (time.monotonic() - pinged)
                )
                try:
                    raw = socket.recv(timeout=max(0.0, wait))
                except TimeoutError:
                    socket.send(json.dumps({"action": "ping"}))
                    pinged = time.monotonic()
                    continue
                except ConnectionClosed:
                    break  # idle limit, 2-hour limit, a deploy: reconnect and resume
                yield from follower.on_message(json.loads(raw))
                if follower.gap and not follower.done:
                    yield from _fill(client, follower)
        if follower.done:
            return
    raise SocketUnavailable("the WebSocket kept closing; polling instead")


def _by_polling(
    client: Any, follower: Follower, deadline: float | None, poll_s: float
) -> Iterator[FollowItem]:
    while True:
        yield from _fill(client, follower)
        yield from follower.on_job(client.get(follower.job_id))
        if follower.done:
            return
        time.sleep(min(poll_s, time_left(deadline, follower.job_id)))
