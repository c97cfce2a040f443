"""The ports of live runs: run events, WebSocket connections and their rooms, and posting.

The DynamoDB adapters (``pagefleet.adapters.dynamodb.events`` / ``.connections``) and the
API Gateway management adapter (``pagefleet.adapters.live``) implement them; ``devstack/fakes``
implements them in memory and ``tests/contract`` holds both to one suite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# The room of every job of a tenant (``{"action": "subscribe", "jobs": "all"}``).
ALL_JOBS = "*"


class EventStore(Protocol):
    """A job's run events, under the tenant's partition, in ``seq`` order."""

    def allocate(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        """Reserve ``count`` sequence numbers, ``bounded`` of them for bounded kinds:
        (the first reserved number, bounded events reserved so far for the job, these
        included). Atomic: two writers never get the same numbers."""
        ...

    def put(
        self,
        tenant_id: str,
        job_id: str,
        events: list[dict[str, Any]],
        *,
        expires_at: int,
        attempt: int,
    ) -> None:
        """Store events (numbered, ascending). Writing the same events twice is harmless."""
        ...

    def page(
        self, tenant_id: str, job_id: str, *, after: int, limit: int, now: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` events with ``seq > after`` not expired at ``now``, and whether
        more are stored."""
        ...


@dataclass(frozen=True)
class Connection:
    """A WebSocket connection: whose it is, what it follows, and its send window."""

    connection_id: str
    tenant_id: str
    key_id: str
    connected_at: float
    expires_at: int = 0
    rooms: frozenset[str] = frozenset()
    # The rate window: messages sent in epoch second ``window``, and the jobs whose events
    # went out in it (one events message per job per second).
    window: int = 0
    sent: int = 0
    window_jobs: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Ticket:
    tenant_id: str
    key_id: str


class SubscriptionLimit(Exception):
    """The connection follows as many rooms as it may."""


class Connections(Protocol):
    """Connections (TTL: API Gateway's 2 h maximum), rooms, tickets, send windows."""

    def open(
        self, connection_id: str, *, tenant_id: str, key_id: str, now: float, expires_at: int
    ) -> Connection: ...

    def get(self, connection_id: str) -> Connection | None: ...

    def subscribe(self, connection_id: str, room: str, *, max_rooms: int) -> bool:
        """Join ``room``; False when the connection is gone. Raises ``SubscriptionLimit``."""
        ...

    def unsubscribe(self, connection_id: str, room: str, *, now: float) -> bool:
        """Leave ``room``; False when the connection did not follow it."""
        ...

    def close(self, connection_id: str) -> None:
        """Forget the connection and its rooms (idempotent)."""
        ...

    def followers(self, tenant_id: str, job_ids: Sequence[str]) -> dict[str, list[Connection]]:
        """The connections following each of the tenant's ``job_ids`` (the job, or all the
        tenant's jobs), for those with any, asked at once: a tenant whose jobs nobody
        follows costs one read, whatever the jobs."""
        ...

    def idle(self, since_before: float, limit: int = 100) -> list[str]:
        """Connections that have followed nothing since before ``since_before``."""
        ...

    def following(self) -> list[Connection]:
        """Every connection that follows any room (the reaper's look for followers of
        sessions that ended)."""
        ...

    def reserve(self, seen: Connection, *, window: int, count: int, jobs: frozenset[str]) -> bool:
        """Count ``count`` messages (events of ``jobs``) in the connection's send window
        ``window``, if its window is still as ``seen`` (optimistic); False otherwise."""
        ...

    def put_ticket(self, ticket_hash: str, ticket: Ticket, *, expires_at: int) -> None: ...

    def take_ticket(self, ticket_hash: str, *, now: int) -> Ticket | None:
        """The ticket if it exists and is valid at ``now``; it cannot be taken twice."""
        ...


class ConnectionPoster(Protocol):
    """API Gateway's management API (``@connections``) of the WebSocket stage."""

    def post(self, connection_id: str, data: bytes) -> bool:
        """Send one message; False when the connection is gone (410)."""
        ...

    def close(self, connection_id: str) -> None:
        """Close the connection from the server's side (its ``$disconnect`` follows)."""
        ...
