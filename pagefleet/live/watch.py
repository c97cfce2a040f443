"""Watching a running job's page (live view): the ``watch`` / ``unwatch`` actions of the
WebSocket API.

A connection watches one of its tenant's jobs (a browser session is a job) by sending
``{"action": "watch", "job_id"}``, again at least every ``WATCH_TTL_S`` / 3 seconds while it
looks; the job's record then names the connection until ``WATCH_TTL_S`` later. The worker
running the job reads its watchers with the cancel flag every second: while there are any,
it runs Chromium's screencast and posts each frame to them through the stage's
``@connections`` API; when there are none, no screencast runs (a job nobody watches pays
nothing). Another tenant's job looks like no job, and nothing is written or sent.

The ``frame`` messages the worker posts to the watchers are ``pagefleet.live.frames``: a
module apart, so that the worker does not import the WebSocket API's service.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet import ids
from pagefleet.errors import NotFound
from pagefleet.live.messages import error_message
from pagefleet.live.ports import Connection
from pagefleet.live.service import LiveServices, parse_action

# A watch lasts this long unless sent again; the console sends it every 10 seconds.
WATCH_TTL_S = 30


class Watch(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    action: Literal["watch", "unwatch"]
    job_id: str = Field(pattern=ids.JOB_ID)


Acting = tuple[Watch, Connection]


def _acting(svc: LiveServices, connection_id: str, body: str | None) -> Acting | dict[str, Any]:
    """The action and the connection sending it, or the error message answering it."""
    action = parse_action(Watch, body)
    if isinstance(action, dict):
        return action
    connection = svc.connections.get(connection_id)
    if connection is None:
        return error_message("not_connected", "this connection is not known; reconnect")
    return action, connection


def watch(svc: LiveServices, connection_id: str, body: str | None) -> dict[str, Any]:
    """Mark the job watched by this connection for ``WATCH_TTL_S`` (its owner only)."""
    acting = _acting(svc, connection_id, body)
    if isinstance(acting, dict):
        return acting
    action, connection = acting
    try:
        job = svc.jobs.get(connection.tenant_id, action.job_id)
    except NotFound:
        # Another tenant's job looks exactly like no job: nothing is marked, nothing sent.
        return error_message("not_found", "no such job", job_id=action.job_id)
    if job.status.is_final:
        return error_message(
            "job_ended",
            f"the job has ended ({job.status.value}): nothing to watch",
            job_id=action.job_id,
        )
    now = int(svc.clock.now())
    until = now + WATCH_TTL_S
    svc.jobs.watch(connection.tenant_id, action.job_id, connection_id, until=until, now=now)
    return {
        "type": "watching",
        "job_id": action.job_id,
        "until": until,
        "renew_within_s": WATCH_TTL_S // 3,
        "status": job.status.value,
    }


def unwatch(svc: LiveServices, connection_id: str, body: str | None) -> dict[str, Any]:
    acting = _acting(svc, connection_id, body)
    if isinstance(acting, dict):
        return acting
    action, connection = acting
    svc.jobs.unwatch(connection.tenant_id, action.job_id, connection_id)
    return {"type": "unwatched", "job_id": action.job_id}
