"""Domain errors, named by what the caller should do about them.

functions/api/errors.py maps these to HTTP in one place; the worker maps step errors to
retry / fail decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class PagefleetError(Exception):
    """Base of every error pagefleet raises on purpose."""

    code = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


# --- client must change the request ------------------------------------------------------
class InvalidRequest(PagefleetError):
    """The request is malformed (a bad cursor, header or value): fix what ``field`` names."""

    code = "invalid_request"

    def __init__(self, message: str, *, field: str | None = None, **details: Any) -> None:
        super().__init__(message, field=field, **details)
        self.field = field


class InvalidField(InvalidRequest):
    """A field of the request holds a value that cannot be used (422, naming the field)."""

    code = "validation_error"

    @classmethod
    def from_errors(
        cls, errors: Iterable[Mapping[str, Any]], *, within: tuple[Any, ...] = (), origin: str = ""
    ) -> InvalidField:
        """Pydantic's errors (``ValidationError.errors()``) as the API's field error: the
        first names the field, every one is listed as {field, reason}. ``within``: where the
        validated value sits in the request; ``origin``: what the message is prefixed with."""
        details = [
            {
                "field": field_path((*within, *e.get("loc", ()))),
                "reason": str(e.get("msg", "invalid")),
            }
            for e in errors
        ] or [{"field": field_path(within), "reason": "invalid"}]
        first = details[0]
        return cls(
            f"{origin}{first['field']}: {first['reason']}", field=first["field"], details=details
        )


def field_path(loc: Iterable[Any]) -> str:
    """A pydantic location as the API names a field: ``("steps", 0, "goto", "url")`` is
    ``steps[0].goto.url``; the empty location is the ``body``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "body"


class RequestTooLarge(InvalidRequest):
    """The request (or the job record it would make) is over a size limit: send less."""

    code = "request_too_large"


class NotFound(PagefleetError):
    """No such job, workflow, schedule or session for this tenant (another's is not found
    either): check the id."""

    code = "not_found"


class IdempotencyKeyReused(PagefleetError):
    """Same Idempotency-Key, different body: the client must pick a new key."""

    code = "idempotency_key_reused"


class JobNotCancellable(PagefleetError):
    """The job already ended: nothing to cancel (the message names its state)."""

    code = "conflict"


class JobNotInReview(PagefleetError):
    """Only a job in needs_review can be resolved; the message names its state."""

    code = "conflict"


class Unauthorized(PagefleetError):
    """No API key, or an unknown or revoked one: send ``Authorization: Bearer <key>``."""

    code = "unauthorized"


class Forbidden(PagefleetError):
    """The route needs an admin API key: ask an operator."""

    code = "forbidden"


class NotConfigured(PagefleetError):
    """The deployment does not offer this (e.g. schedules without a Scheduler group)."""

    code = "not_configured"


# --- caller may retry ----------------------------------------------------------------------
class TooManyRequests(PagefleetError):
    """A tenant limit said no for now (429); ``headers`` say when to try again."""

    code = "too_many_requests"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None, **details: Any):
        super().__init__(message, **details)
        self.headers = dict(headers or {})


class RateLimited(TooManyRequests):
    """Over the tenant's submissions per minute: retry after ``Retry-After`` seconds."""

    code = "rate_limited"


class QueueFull(TooManyRequests):
    """The tenant has ``max_queued`` jobs waiting: retry when some have started."""

    code = "queue_full"


class SessionEnded(PagefleetError):
    """The browser session is closed or lost: open a new one (409; ``status`` says which)."""

    code = "session_ended"


class EnqueueFailed(PagefleetError):
    """The job is recorded but its message did not reach the queue; retry with the same key."""

    code = "enqueue_failed"


class StoreBusy(PagefleetError):
    """The job store left part of a batch undone however often it was asked (throttled);
    retry the same request."""

    code = "store_busy"


# --- secrets: the worker fails the job, or retries it ---------------------------------------
class SecretUnreadable(PagefleetError):
    """The secret exists but cannot be used (policy, key, binary): fix it, then resubmit."""

    code = "secret_unreadable"


class SecretsUnavailable(PagefleetError):
    """Secrets Manager did not answer: the job may run again later."""

    code = "secrets_unavailable"


# --- store-level: the write lost a race --------------------------------------------------
class IllegalTransition(PagefleetError):
    """The job is not in a state from which this move is allowed; re-read before acting."""

    code = "illegal_transition"
    # The record as the refused write saw it, when the store has it (a refused claim's):
    # what to act on instead of reading it again.
    seen: Any = None


class DeadlinePassed(IllegalTransition):
    """The job's latest start time is behind us: expire it instead of running it."""

    code = "deadline_passed"


class RetryNotDue(IllegalTransition):
    """An early duplicate of a retry's message: put it back until the retry is due."""

    code = "retry_not_due"


class IdempotencyConflict(PagefleetError):
    """The idempotency key is already taken (by an earlier or a concurrent request)."""

    code = "idempotency_conflict"


class LeaseLost(PagefleetError):
    """Another attempt owns the job now: stop working on it and write nothing more."""

    code = "lease_lost"


class JobNotEnded(PagefleetError):
    """Only a job that ended can be replayed; the message names its state."""

    code = "conflict"


class JobNotWaiting(PagefleetError):
    """Only a job in waiting_for_human can be continued; the message names its state."""

    code = "conflict"


class TakenOver(PagefleetError):
    """Another person holds the job's page: wait for them to hand it back (or for its
    ``until``), then take it over (409; ``holder`` and ``until`` say who and how long)."""

    code = "taken_over"


class TakeoverNotHeld(PagefleetError):
    """The caller does not hold this takeover (handed back, returned after its idle time, or
    the job moved on): take the page over again (409)."""

    code = "takeover_not_held"


class JobNotRunning(PagefleetError):
    """Only a running job (or one waiting for a person) has a page to take over (409;
    ``status`` names its state)."""

    code = "conflict"
