"""A threaded HTTP server bound to loopback, run on a daemon thread (local stack parts)."""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


def reserve_loopback_port() -> socket.socket:
    """A socket listening on 127.0.0.1 at a free port, for a server to take over.

    Held, not just chosen: a port bound and closed again can be handed to any outgoing
    connection as its ephemeral port before the server binds it (seen in CI as EADDRINUSE).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def serve_on_loopback(
    handler: type[BaseHTTPRequestHandler], name: str = "loopback-http", host: str = "127.0.0.1"
) -> LoopbackServer:
    """Serve ``handler`` on a loopback address (127.0.0.0/8) at a free port, started (tests,
    benchmarks, stand-ins)."""
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"{host} is not a loopback address")
    return LoopbackServer(ThreadingHTTPServer((host, 0), handler), name).start()


class LoopbackServer:
    """Owns a server bound to loopback; ``start()`` serves it, ``stop()`` closes it."""

    def __init__(self, server: ThreadingHTTPServer, name: str) -> None:
        server.daemon_threads = True
        self._server = server
        self._name = name
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=self._name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()
