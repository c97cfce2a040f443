"""Live delivery: the jobs stream's changes and run events, posted to each job's followers.

A consumer of the one stream reader (``pagefleet.jobs.changes``). For each stream batch:

- per job, ONE ``events`` message with every run event the batch carries (the worker writes
  at most once a second per job, so a follower gets at most about one a second), and a
  ``status`` message for every state change, in stream order;
- per connection, at most ``messages_per_s`` messages in any epoch second, and at most one
  ``events`` message per job per second. Both are counted in the connection's record with
  optimistic conditional writes, so concurrent invocations share one budget. What exceeds
  the budget is coalesced into one ``batch`` message; events of a job that already had its
  message this second wait for the next second (a sleep of under a second). Nothing is
  dropped: a failure fails the batch, which the stream delivers again (clients drop events
  they already have by ``seq``);
- a connection API Gateway says is gone (410) is forgotten, rooms and all.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pagefleet.jobs.changes import EventsWritten, JobChange
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock
from pagefleet.live.messages import batch_message, dumps, events_message, fit, status_message
from pagefleet.live.ports import Connection, ConnectionPoster, Connections

log = logging.getLogger("pagefleet.live")

# How many send windows one connection may wait for before the batch is failed (retried).
MAX_WINDOWS = 5


class DeliveryBacklog(RuntimeError):
    """A connection's budget stayed spent for too long: retry the stream batch later."""


@dataclass
class Outgoing:
    job_id: str
    body: dict[str, Any]
    has_events: bool
    order: int


def _order(sequence: str, fallback: int) -> int:
    return int(sequence) if sequence.isdigit() else fallback


def compose(
    changes: Sequence[JobChange], written: Sequence[EventsWritten]
) -> dict[tuple[str, str], list[Outgoing]]:
    """The messages of one batch, by (tenant, job), in stream order: a job's events merged
    into one message at the place of its first events item, statuses where they happened."""
    out: dict[tuple[str, str], list[Outgoing]] = {}
    events: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    first: dict[tuple[str, str], int] = {}
    written_at: dict[tuple[str, str], float] = {}
    for position, item in enumerate(written):
        key = (item.tenant_id, item.job_id)
        events.setdefault(key, {}).update((int(e["seq"]), e) for e in item.events)
        first.setdefault(key, _order(item.sequence, position))
        if item.written_at is not None:
            written_at.setdefault(key, item.written_at)
    for key, by_seq in events.items():
        body = events_message(key[1], [by_seq[s] for s in sorted(by_seq)])
        if key in written_at:
            body["written_at"] = round(written_at[key], 3)
        out.setdefault(key, []).append(Outgoing(key[1], body, True, first[key]))
    for position, change in enumerate(changes):
        if change.new is None or not change.status_changed:
            continue
        job = change.new
        key = (job.tenant_id, job.job_id)
        body = status_message(job, written_at=change.written_at)
        out.setdefault(key, []).append(
            Outgoing(job.job_id, body, False, _order(change.sequence, len(written) + position))
        )
    for messages in out.values():
        messages.sort(key=lambda m: m.order)
    return out


class LiveDelivery:
    """``ChangeConsumer`` (with run events) that posts to WebSocket followers."""

    name = "live"

    def __init__(
        self,
        connections: Connections,
        poster: ConnectionPoster,
        *,
        messages_per_s: int = 10,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if messages_per_s < 2:
            raise ValueError("messages_per_s must leave room for a coalesced message (>= 2)")
        self.connections = connections
        self.poster = poster
        self.messages_per_s = messages_per_s
        self.clock = clock
        self._sleep = sleep

    def handle(self, changes: Sequence[JobChange]) -> None:
        self.handle_batch(changes, ())

    def handle_batch(self, changes: Sequence[JobChange], events: Sequence[EventsWritten]) -> None:
        received = round(self.clock.now(), 3)
        by_job = compose(changes, events)
        for messages in by_job.values():
            for message in messages:
                message.body["received_at"] = received  # when the stream reader got it
        jobs_of: dict[str, list[str]] = {}
        for tenant_id, job_id in by_job:
            jobs_of.setdefault(tenant_id, []).append(job_id)
        targets: dict[str, tuple[Connection, list[Outgoing]]] = {}
        for tenant_id, job_ids in jobs_of.items():
            # Once per tenant and batch: most jobs have no follower at all.
            for job_id, following in self.connections.followers(tenant_id, job_ids).items():
                for connection in following:
                    entry = targets.setdefault(connection.connection_id, (connection, []))
                    entry[1].extend(by_job[(tenant_id, job_id)])
        failed: list[Exception] = []
        for connection, messages in targets.values():
            messages.sort(key=lambda m: m.order)
            try:
                self.send(connection, messages)
            except Exception as exc:  # the others still get theirs first
                log.warning("delivery to %s failed: %s", connection.connection_id, exc)
                failed.append(exc)
        if failed:
            # The batch comes again (clients drop what they have by seq and status).
            raise failed[0]

    def send(self, connection: Connection, messages: list[Outgoing]) -> None:
        """Post ``messages`` to one connection within its budget (waiting a window if need be)."""
        pending = list(messages)
        seen: Connection | None = connection
        held = 0.0  # how long the rate rules kept these messages back
        for _ in range(MAX_WINDOWS):
            assert seen is not None
            now = self.clock.now()
            window = max(int(now), seen.window)
            same = seen.window == window
            budget = self.messages_per_s - (seen.sent if same else 0)
            blocked = seen.window_jobs if same else frozenset()
            ready = in_order(pending, blocked)
            if budget <= 0 or not ready:
                pause = max(0.0, window + 1 - now)
                self._sleep(pause)
                held += pause
                seen = self.connections.get(connection.connection_id)
                if seen is None:
                    return  # disconnected meanwhile
                continue
            bodies = coalesce([m.body for m in ready], budget)
            jobs = frozenset(m.job_id for m in ready if m.has_events)
            if not self.connections.reserve(seen, window=window, count=len(bodies), jobs=jobs):
                seen = self.connections.get(connection.connection_id)
                if seen is None:
                    return
                continue
            if not self._post_all(connection.connection_id, bodies, held, window):
                return
            sent_now = {id(m) for m in ready}
            pending = [m for m in pending if id(m) not in sent_now]
            if not pending:
                return
            seen = dataclasses.replace(
                seen,
                window=window,
                sent=(seen.sent if same else 0) + len(bodies),
                window_jobs=blocked | jobs,
            )
        raise DeliveryBacklog(
            f"connection {connection.connection_id}: {len(pending)} messages still waiting"
        )

    def _post_all(
        self, connection_id: str, bodies: list[dict[str, Any]], held: float, window: int
    ) -> bool:
        for body in bodies:
            # ``window``: the second whose budget it counted against (a slow post may be sent
            # in the next one; the budget, not the post's clock, is what the cap holds to).
            stamped = {**body, "sent_at": round(self.clock.now(), 3), "window": window}
            if held:
                stamped["held_s"] = round(held, 3)
            if not self.poster.post(connection_id, dumps(stamped)):
                log.info("connection %s is gone; forgetting it", connection_id)
                self.connections.close(connection_id)
                return False
        return True


def in_order(pending: list[Outgoing], blocked: frozenset[str]) -> list[Outgoing]:
    """What may go now: not the events of a job that had its message this second, nor
    anything of that job after them (a job's messages keep their order)."""
    held: set[str] = set()
    ready = []
    for message in pending:
        if message.job_id in held or (message.has_events and message.job_id in blocked):
            held.add(message.job_id)
            continue
        ready.append(message)
    return ready


def coalesce(bodies: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """At most ``budget`` messages: the first ones as they are, the excess in one batch."""
    if len(bodies) <= budget:
        return [fit(b) for b in bodies]
    keep = bodies[: budget - 1]
    return [*(fit(b) for b in keep), fit(batch_message(bodies[budget - 1 :]))]
