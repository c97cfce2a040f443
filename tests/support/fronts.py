"""A middleware of the embedded AWS in front of this process's moto backends, on a clock the
test moves: an expiry is met without waiting for it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any


class Clock:
    """Now, as the test says (starting at the real time: botocore signs with that)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def served_behind(front: Callable[[Any], Any]) -> Iterator[str]:
    """The session's moto backends behind ``front(app)``, served on loopback: its URL."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    server = make_server(
        "127.0.0.1", 0, front(DomainDispatcherApplication(create_backend_app)), threaded=True
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
