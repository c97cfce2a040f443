"""The messages the live WebSocket API sends, as JSON objects (README: "Follow a job live").

- ``{"type": "status", "job_id", "status", "attempt", "final", ...}`` on every state change;
- ``{"type": "events", "job_id", "events": [...], "more", "next_after"}``: run events in
  ``seq`` order; ``more: true`` means more events than fit in one message were written:
  read them from ``GET /v1/jobs/{id}/events?after=<next_after>``;
- ``{"type": "batch", "messages": [...]}``: messages coalesced under the per-connection
  rate cap (never dropped), in order;
- ``{"type": "error", "code", "message"}`` and the answers to client actions
  (``subscribed``, ``unsubscribed``, ``pong``).

A message is at most ``MESSAGE_MAX_BYTES`` of JSON (API Gateway takes 128 KB a message).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pagefleet.jobs.record import JobRecord
from pagefleet.live.events import ended

MESSAGE_MAX_BYTES = 120 * 1024


def dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def status_message(
    job: JobRecord, *, written_at: float | None = None, sent_at: float | None = None
) -> dict[str, Any]:
    """The job's status as a follower needs it (ids, status, attempt, timing, error)."""
    message: dict[str, Any] = {
        "type": "status",
        "job_id": job.job_id,
        "status": job.status.value,
        "final": ended(job.status),
        "attempt": job.attempt,
        "updated_at": job.updated_at,
    }
    if job.finished_at:
        message["finished_at"] = job.finished_at
    if job.error is not None:
        message["error"] = job.error.model_dump(mode="json", exclude_none=True)
    if job.cancel_requested_at:
        message["cancel_requested_at"] = job.cancel_requested_at
    if job.deferred_reason:
        message["deferred_reason"] = job.deferred_reason
    if written_at is not None:
        message["written_at"] = round(written_at, 3)  # when the stream saw the change
    if sent_at is not None:
        message["sent_at"] = round(sent_at, 3)
    return message


def events_message(
    job_id: str, events: Sequence[dict[str, Any]], *, more: bool = False
) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "events", "job_id": job_id, "events": list(events)}
    if events:
        message["next_after"] = int(events[-1]["seq"])
    if more:
        message["more"] = True
    return message


def error_message(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "code": code, "message": message, **extra}


def batch_message(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "batch", "messages": list(messages)}


def fit(message: dict[str, Any], limit: int = MESSAGE_MAX_BYTES) -> dict[str, Any]:
    """``message`` within ``limit`` bytes: the largest events lists are cut (``more`` set,
    ``next_after`` on the last event kept), so a reader knows to fetch the rest."""
    if len(dumps(message)) <= limit:
        return message
    is_batch = message["type"] == "batch"
    parts = [dict(m) for m in message["messages"]] if is_batch else [dict(message)]
    while True:
        whole = batch_message(parts) if is_batch else parts[0]
        if len(dumps(whole)) <= limit:
            return whole
        cuttable = [p for p in parts if p.get("type") == "events" and p.get("events")]
        if not cuttable:
            raise ValueError("a message without events cannot be over the size limit")
        biggest = max(cuttable, key=lambda p: len(dumps(p)))
        events = biggest["events"]
        kept = events[: len(events) // 2]
        biggest["events"] = kept
        biggest["more"] = True
        if kept:
            biggest["next_after"] = int(kept[-1]["seq"])
        else:
            # Nothing of this job's events fits: the reader fetches from before the first one.
            biggest["next_after"] = int(events[0]["seq"]) - 1
