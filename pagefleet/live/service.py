"""The WebSocket API's service: connect (key or ticket), follow jobs, leave, idle reaping,
and leaving the rooms of browser sessions that ended (the reaper's minute).

``functions/live`` parses API Gateway's WebSocket events and calls one function here. The
answers to a client's action are messages (dicts) the handler returns as the route's
response; the catch-up events of a subscription are posted before it, so a client sees the
events since its ``after`` and then the job's status.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pagefleet import ids
from pagefleet.errors import NotFound, Unauthorized
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock, JobStore, TenantStore
from pagefleet.live.messages import dumps, error_message, events_message, fit, status_message
from pagefleet.live.ports import (
    ALL_JOBS,
    Connection,
    ConnectionPoster,
    Connections,
    EventStore,
    SubscriptionLimit,
    Ticket,
)
from pagefleet.tenancy.api_keys import authenticate

Action = TypeVar("Action", bound=BaseModel)
TICKET_PREFIX = "lt_"
TICKET_TTL_S = 60
# Events a subscription catches up with in its first message (the rest: the events route).
CATCH_UP_MAX = 1000


@dataclass(frozen=True)
class LiveServices:
    connections: Connections
    poster: ConnectionPoster
    jobs: JobStore
    events: EventStore
    tenants: TenantStore
    idle_unsubscribed_s: int = 300
    max_rooms: int = 100
    connection_ttl_s: int = 2 * 3600 + 300
    clock: Clock = SYSTEM_CLOCK


class Subscribe(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    action: Literal["subscribe", "unsubscribe"]
    job_id: str | None = Field(default=None, pattern=ids.JOB_ID)
    jobs: Literal["all"] | None = None
    after: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_target(self) -> Subscribe:
        if (self.job_id is None) == (self.jobs is None):
            raise ValueError('give either "job_id" or "jobs": "all"')
        return self

    @property
    def room(self) -> str:
        return self.job_id or ALL_JOBS


def ticket_hash(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()


def issue_ticket(
    connections: Connections, *, tenant_id: str, key_id: str, now: float
) -> tuple[str, int]:
    """A single-use connect ticket for browsers (which cannot send headers): (ticket,
    expiry). Only its hash is stored; it names the key that asked for it."""
    ticket = TICKET_PREFIX + secrets.token_urlsafe(32)
    expires_at = int(now) + TICKET_TTL_S
    connections.put_ticket(
        ticket_hash(ticket), Ticket(tenant_id=tenant_id, key_id=key_id), expires_at=expires_at
    )
    return ticket, expires_at


def connect(
    svc: LiveServices,
    connection_id: str,
    *,
    authorization: str | None,
    ticket: str | None,
) -> Connection:
    """``$connect``: a Bearer API key or a ticket, both resolved through the key records."""
    now = svc.clock.now()
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and key.strip():
        record = authenticate(svc.tenants, key.strip())
        tenant_id, key_id = record.tenant_id, record.key_id
    elif ticket:
        taken = svc.connections.take_ticket(ticket_hash(ticket), now=int(now))
        if taken is None:
            raise Unauthorized("unknown, used or expired ticket")
        # The key that asked for the ticket must still be valid (not revoked since).
        keys = svc.tenants.keys_of(taken.tenant_id)
        valid = any(r.key_id == taken.key_id and not r.revoked for _, r in keys)
        if not valid:
            raise Unauthorized("the key that issued this ticket was revoked")
        tenant_id, key_id = taken.tenant_id, taken.key_id
    else:
        raise Unauthorized("send Authorization: Bearer <API key>, or ?ticket=<ticket>")
    return svc.connections.open(
        connection_id,
        tenant_id=tenant_id,
        key_id=key_id,
        now=now,
        expires_at=int(now) + svc.connection_ttl_s,
    )


def parse_action(model: type[Action], body: str | None) -> Action | dict[str, Any]:
    """A client's message as ``model``, or the error message answering it."""
    try:
        return model.model_validate(json.loads(body or "{}"))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error.get("loc", ()))
        reason = f"{where}: {error['msg']}" if where else error["msg"]
        return error_message("invalid_request", f"invalid message: {reason}")
    except ValueError as exc:
        return error_message("invalid_request", f"invalid message: {exc}")


def _parse(body: str | None) -> Subscribe | dict[str, Any]:
    return parse_action(Subscribe, body)


def subscribe(svc: LiveServices, connection_id: str, body: str | None) -> dict[str, Any]:
    """Join a job's room (after an ownership check) or the tenant's all-jobs room."""
    action = _parse(body)
    if isinstance(action, dict):
        return action
    connection = svc.connections.get(connection_id)
    if connection is None:
        return error_message("not_connected", "this connection is not known; reconnect")
    if action.job_id is not None:
        try:
            svc.jobs.get(connection.tenant_id, action.job_id)
        except NotFound:
            # Another tenant's job looks exactly like no job, and joins nothing.
            return error_message("not_found", "no such job", job_id=action.job_id)
    try:
        joined = svc.connections.subscribe(connection_id, action.room, max_rooms=svc.max_rooms)
    except SubscriptionLimit as exc:
        return error_message("too_many_subscriptions", str(exc))
    if not joined:
        return error_message("not_connected", "this connection is not known; reconnect")
    if action.job_id is None:
        return {"type": "subscribed", "jobs": "all"}
    # Read after joining: a change after this read reaches the room through the stream.
    job = svc.jobs.get(connection.tenant_id, action.job_id)
    if action.after is not None:
        events, more = svc.events.page(
            connection.tenant_id,
            action.job_id,
            after=action.after,
            limit=CATCH_UP_MAX,
            now=int(svc.clock.now()),
        )
        if events or more:
            caught_up = fit(events_message(action.job_id, events, more=more))
            if not svc.poster.post(connection_id, dumps(caught_up)):
                svc.connections.close(connection_id)
                return error_message("not_connected", "the connection is gone")
    return {**status_message(job, sent_at=svc.clock.now()), "subscribed": True}


def unsubscribe(svc: LiveServices, connection_id: str, body: str | None) -> dict[str, Any]:
    action = _parse(body)
    if isinstance(action, dict):
        return action
    left = svc.connections.unsubscribe(connection_id, action.room, now=svc.clock.now())
    target = {"job_id": action.job_id} if action.job_id else {"jobs": "all"}
    if not left:
        return error_message("not_subscribed", "this connection does not follow that", **target)
    return {"type": "unsubscribed", **target}


def disconnect(svc: LiveServices, connection_id: str) -> None:
    svc.connections.close(connection_id)


def unfollow_ended(svc: LiveServices) -> int:
    """Leave the rooms of browser sessions that ended ``ENDED_GRACE_S`` ago or more (or are
    gone): nothing more is sent to them, and a connection that follows nothing else is idle
    from now on (``reap_idle`` closes it after ``idle_unsubscribed_s``), instead of being
    held open by a session that is over until API Gateway's 2 hours. Each leave is the
    idempotent ``unsubscribe``; returns the followers removed."""
    now = svc.clock.now()
    by_room: dict[tuple[str, str], list[str]] = {}
    for connection in svc.connections.following():
        for room in connection.rooms - {ALL_JOBS}:
            by_room.setdefault((connection.tenant_id, room), []).append(connection.connection_id)
    removed = 0
    for (tenant_id, job_id), followers in sorted(by_room.items()):
        if not _ended_session(svc, tenant_id, job_id, now):
            continue
        for connection_id in followers:
            removed += svc.connections.unsubscribe(connection_id, job_id, now=now)
    return removed


# A session's followers are left this long after it ended: its final status and last
# events go out to them first (the jobs stream's reader sends them within seconds).
ENDED_GRACE_S = 60


def _ended_session(svc: LiveServices, tenant_id: str, job_id: str, now: float) -> bool:
    try:
        job = svc.jobs.get(tenant_id, job_id)
    except NotFound:
        return True  # deleted (or never there): nothing will be sent to its room
    if job.request.session is None or not job.status.is_final:
        return False
    finished = epoch_of_iso(job.finished_at) if job.finished_at else now
    return now - finished >= ENDED_GRACE_S


def reap_idle(svc: LiveServices) -> list[str]:
    """Close connections that have followed nothing for ``idle_unsubscribed_s``."""
    cutoff = svc.clock.now() - svc.idle_unsubscribed_s
    closed = []
    for connection_id in svc.connections.idle(cutoff):
        svc.poster.close(connection_id)  # API Gateway then invokes $disconnect
        svc.connections.close(connection_id)  # in case it never does
        closed.append(connection_id)
    return closed
