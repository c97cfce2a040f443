"""When the client sends a request again, and when it must not.

On AWS the API sits behind API Gateway, which answers for it when it cannot: ``429`` when
the account or stage is throttled, ``502`` when the function failed or was throttled, ``504``
after its 29-second integration timeout
(https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html). The API itself
answers ``429`` over a tenant's rate or queued room and ``503`` while a table is busy, each
with ``Retry-After``. A client that raised each of those at once made every caller write
the loop AWS's own SDKs have.

A request is sent again, at most ``attempts`` times in all, when:

- it was refused before anything ran: a ``429`` (API Gateway's throttling and the API's
  refusals write nothing), or a connection that could not be made (nothing was sent);
- it may be repeated and met a ``502``, ``503`` or ``504`` or lost its connection after it
  was sent: a ``GET``, ``HEAD``, ``PUT`` or ``DELETE``, a request with an
  ``Idempotency-Key`` (the same key goes each time, so a job is made once), or a call the
  client marks safe (a session's steps carry their ``command_id``: run once or answered).

A ``POST /v1/jobs`` without a key that met a ``502``/``503``/``504`` is not sent again: the
job may have been recorded (give ``idempotency_key`` to make it safe). The wait is the
answer's ``Retry-After`` when it gives one (not retried when that is over ``max_wait_s``:
the caller sees it on ``ApiError.retry_after``: a tenant over its rate or its running
sessions is told tens of seconds, which a call should not sit out unasked), else
exponential with full jitter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from pagefleet.backoff import Backoff, Jitter

# Answers that say the request did not run (429) or may not have (the rest).
NOT_RUN = frozenset({429})
MAYBE_RUN = frozenset({502, 503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# Errors raised before the request left: it cannot have run.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Errors of the network or the peer, which another send may not meet. Not the others
# (an unsupported scheme, a proxy refused, a request httpx itself could not write): those
# fail the same way every time.
_PASSING = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
# Full jitter: many clients refused together spread out the most.
BACKOFF = Backoff(0.5, 8.0, Jitter.FULL)


@dataclass(frozen=True)
class Retries:
    """``attempts``: sends in all (1: never again); ``max_wait_s``: the longest wait taken."""

    attempts: int = 3
    backoff: Backoff = BACKOFF
    max_wait_s: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a request is sent at least once (attempts >= 1)")

    def send(self, request: Callable[[], httpx.Response], *, safe: bool) -> httpx.Response:
        """``request()``'s answer, sent again as the rules above say."""
        attempt = 1
        while True:
            last = attempt >= self.attempts
            try:
                response = request()
            except _PASSING as exc:
                if last or not (safe or isinstance(exc, _NOT_SENT)):
                    raise
                self.sleep(self.backoff.delay(attempt))
            else:
                wait = None if last else self._wait(response, safe, attempt)
                if wait is None:
                    return response
                self.sleep(wait)
            attempt += 1

    def _wait(self, response: httpx.Response, safe: bool, attempt: int) -> float | None:
        """How long to wait before sending again, or None: answer with ``response``."""
        status = response.status_code
        if status not in NOT_RUN and not (safe and status in MAYBE_RUN):
            return None
        told = retry_after_s(response)
        if told is None:
            return self.backoff.delay(attempt)
        return told if told <= self.max_wait_s else None


def retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the API sends seconds; a date is not read)."""
    value = response.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def is_safe(method: str, headers: httpx.Headers | dict[str, str] | None) -> bool:
    """Whether a request may be sent twice by its method or its Idempotency-Key."""
    keyed = headers is not None and any(k.lower() == "idempotency-key" for k in headers)
    return method.upper() in SAFE_METHODS or keyed


NEVER = Retries(attempts=1)
