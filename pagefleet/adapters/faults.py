"""Fault injection for chaos tests: make a share of AWS calls fail like AWS does.

Two kinds of fault, both as AWS produces them:
- rejected: the call never reaches the service; it answers throttling or a 5xx;
- lost reply: the call *is* applied, then its response is replaced by a 5xx, so the client
  retries a write that already happened (the case idempotent design exists for).
botocore's retry mode sees ordinary AWS errors. Off unless a runtime turns it on.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

log = logging.getLogger("pagefleet.adapters.faults")
# Each injection is logged, so a chaos run can count them in every process's log.
INJECTED = "injected fault"


class _Raw:
    """The bit of urllib3's response botocore reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        yield self._body

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        body, self._body = self._body, b""
        return body


@dataclass
class FaultInjector:
    rate: float
    lost_reply_share: float = 0.3
    rng: random.Random = field(default_factory=random.Random)
    injected: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _roll(self) -> str | None:
        with self._lock:
            if self.rng.random() >= self.rate:
                return None
            self.injected += 1
            return "lost" if self.rng.random() < self.lost_reply_share else "reject"

    def attach(self, client: Any) -> None:
        protocol = client.meta.service_model.protocol
        state = threading.local()

        def before_send(request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
            fault = self._roll()
            if fault is not None:
                log.warning(
                    "%s: %s on %s", INJECTED, fault, event_name.removeprefix("before-send.")
                )
            state.lose_reply = fault == "lost"
            if fault == "reject":
                throttle = self.rng.random() < 0.5
                return _error_response(request.url, protocol, throttle=throttle)
            return None

        def needs_retry(response: Any = None, attempts: int = 1, **_: Any) -> int | None:
            # The service applied the call; pretend its reply was lost so botocore sends it
            # again at once, as it does after a dropped connection. Once per call: a reply
            # lost on every try would be an outage, not a fault.
            if getattr(state, "lose_reply", False):
                state.lose_reply = False
                if attempts == 1 and response is not None and response[0].status_code < 300:
                    return 0
            return None

        client.meta.events.register_first("before-send", before_send)
        client.meta.events.register_first("needs-retry", needs_retry)


def _error_response(url: str, protocol: str, *, throttle: bool) -> AWSResponse:
    if protocol == "json":
        status = 400 if throttle else 500
        code = "ThrottlingException" if throttle else "InternalServerError"
        body = json.dumps({"__type": code, "message": "injected fault"}).encode()
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-query-error": f"{code};Sender",
        }
    else:
        status = 503
        code = "SlowDown" if throttle else "ServiceUnavailable"
        body = f"<Error><Code>{code}</Code><Message>injected fault</Message></Error>".encode()
        headers = {"Content-Type": "application/xml"}
    http_headers = HTTPHeaders()
    for name, value in headers.items():
        http_headers[name] = value
    return AWSResponse(url, status, http_headers, _Raw(body))
