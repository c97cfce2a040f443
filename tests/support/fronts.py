"""A middleware of the embedded AWS in front of this process's moto backends, on a clock the
test moves: an expiry is met without waiting for it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F")


class Clock:
    """Now, as the test says (starting at the real time: botocore signs with that)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def served_behind(front: Callable[[Any], F]) -> Iterator[tuple[str, F]]:
    """The session's moto backends behind ``front(app)``, served on loopback: its URL and
    the middleware (to read what it counted)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = front(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True)  # type: ignore[arg-type]  # a WSGI app
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
