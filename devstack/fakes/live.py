"""In-memory run events, connections and the management API (held to the adapters by
tests/contract/test_live_stores.py)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from pagefleet.live.ports import Connection, SubscriptionLimit, Ticket


class FakeEventStore:
    def __init__(self) -> None:
        self.counters: dict[tuple[str, str], tuple[int, int]] = {}
        self.events: dict[tuple[str, str], dict[int, tuple[dict[str, Any], int]]] = {}
        self._lock = threading.Lock()
        self.puts = 0

    def allocate(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        with self._lock:
            seq, total = self.counters.get((tenant_id, job_id), (0, 0))
            self.counters[(tenant_id, job_id)] = (seq + count, total + bounded)
            return seq + 1, total + bounded

    def put(
        self,
        tenant_id: str,
        job_id: str,
        events: list[dict[str, Any]],
        *,
        expires_at: int,
        attempt: int,
    ) -> None:
        with self._lock:
            stored = self.events.setdefault((tenant_id, job_id), {})
            for event in events:
                stored[int(event["seq"])] = (dict(event), expires_at)
            self.puts += 1

    def page(
        self, tenant_id: str, job_id: str, *, after: int, limit: int, now: int
    ) -> tuple[list[dict[str, Any]], bool]:
        with self._lock:
            stored = self.events.get((tenant_id, job_id), {})
            live = [e for s, (e, exp) in sorted(stored.items()) if s > after and exp > now]
        return live[:limit], len(live) > limit


class FakeConnections:
    def __init__(self) -> None:
        self.meta: dict[str, Connection] = {}
        self.idle_since: dict[str, float] = {}
        self.tickets: dict[str, tuple[Ticket, int]] = {}
        self._lock = threading.Lock()

    def open(
        self, connection_id: str, *, tenant_id: str, key_id: str, now: float, expires_at: int
    ) -> Connection:
        with self._lock:
            connection = Connection(connection_id, tenant_id, key_id, now, expires_at)
            self.meta[connection_id] = connection
            self.idle_since[connection_id] = now
            return connection

    def get(self, connection_id: str) -> Connection | None:
        with self._lock:
            return self.meta.get(connection_id)

    def subscribe(self, connection_id: str, room: str, *, max_rooms: int) -> bool:
        with self._lock:
            current = self.meta.get(connection_id)
            if current is None:
                return False
            if room in current.rooms:
                return True
            if len(current.rooms) >= max_rooms:
                raise SubscriptionLimit(f"a connection follows at most {max_rooms} rooms")
            self.meta[connection_id] = dataclasses.replace(current, rooms=current.rooms | {room})
            self.idle_since.pop(connection_id, None)
            return True

    def unsubscribe(self, connection_id: str, room: str, *, now: float) -> bool:
        with self._lock:
            current = self.meta.get(connection_id)
            if current is None or room not in current.rooms:
                return False
            rooms = current.rooms - {room}
            self.meta[connection_id] = dataclasses.replace(current, rooms=rooms)
            if not rooms:
                self.idle_since[connection_id] = now
            return True

    def close(self, connection_id: str) -> None:
        with self._lock:
            self.meta.pop(connection_id, None)
            self.idle_since.pop(connection_id, None)

    def followers(self, tenant_id: str, job_ids: Sequence[str]) -> dict[str, list[Connection]]:
        with self._lock:
            found = {
                job_id: [
                    c
                    for c in self.meta.values()
                    if c.tenant_id == tenant_id and (job_id in c.rooms or "*" in c.rooms)
                ]
                for job_id in job_ids
            }
        return {job_id: following for job_id, following in found.items() if following}

    def idle(self, since_before: float, limit: int = 100) -> list[str]:
        with self._lock:
            found = [c for c, since in self.idle_since.items() if since < since_before]
            return sorted(found, key=lambda c: self.idle_since[c])[:limit]

    def following(self) -> list[Connection]:
        with self._lock:
            return [c for c in self.meta.values() if c.rooms]

    def reserve(self, seen: Connection, *, window: int, count: int, jobs: frozenset[str]) -> bool:
        with self._lock:
            current = self.meta.get(seen.connection_id)
            if current is None:
                return False
            if seen.window == window:
                if current.window != window or current.sent != seen.sent:
                    return False
                if jobs & current.window_jobs:
                    return False
                updated = dataclasses.replace(
                    current, sent=current.sent + count, window_jobs=current.window_jobs | jobs
                )
            else:
                if current.window >= window:
                    return False
                updated = dataclasses.replace(current, window=window, sent=count, window_jobs=jobs)
            self.meta[seen.connection_id] = updated
            return True

    def put_ticket(self, ticket_hash: str, ticket: Ticket, *, expires_at: int) -> None:
        with self._lock:
            if ticket_hash in self.tickets:
                raise ValueError("ticket exists")
            self.tickets[ticket_hash] = (ticket, expires_at)

    def take_ticket(self, ticket_hash: str, *, now: int) -> Ticket | None:
        with self._lock:
            found = self.tickets.get(ticket_hash)
            if found is None or found[1] <= now:
                return None
            del self.tickets[ticket_hash]
            return found[0]


class FakePoster:
    """Records what was posted; connections in ``gone`` answer 410."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, bytes]] = []
        self.closed: list[str] = []
        self.gone: set[str] = set()

    def post(self, connection_id: str, data: bytes) -> bool:
        if connection_id in self.gone:
            return False
        self.posted.append((connection_id, data))
        return True

    def close(self, connection_id: str) -> None:
        self.closed.append(connection_id)

    def messages(self, connection_id: str) -> list[dict[str, Any]]:
        import json

        return [json.loads(d) for c, d in self.posted if c == connection_id]
