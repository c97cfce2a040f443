"""A webhook receiver on 127.0.0.1 that records every POST and answers as told."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from devstack.loopback import serve_on_loopback


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # when it arrived (epoch seconds)


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)
    # Status codes to answer, in order; then ``then`` for every later request.
    answers: list[int] = field(default_factory=list)
    then: int = 204
    extra_headers: dict[str, str] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 60) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.requests)} of {count} requests arrived")
                self.arrived.wait(left)
            return list(self.requests)


@contextmanager
def webhook_receiver(host: str = "127.0.0.1") -> Iterator[Receiver]:
    state: dict[str, Any] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver: Receiver = state["receiver"]
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with receiver.arrived:
                receiver.requests.append(
                    Received(self.path, dict(self.headers.items()), body, time.time())
                )
                status = receiver.answers.pop(0) if receiver.answers else receiver.then
                receiver.arrived.notify_all()
            self.send_response(status)
            for name, value in receiver.extra_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = serve_on_loopback(Handler, "webhook-receiver", host=host)
    state["receiver"] = Receiver(url=f"{server.url}/hooks/pagefleet")
    try:
        yield state["receiver"]
    finally:
        server.stop()
