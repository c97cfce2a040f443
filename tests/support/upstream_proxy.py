"""A stand-in for a job's own HTTP proxy: CONNECT only, Basic credentials, loopback only.

It records every CONNECT it is asked for and tunnels only to loopback targets, so a test
whose egress check were broken still sends nothing off this machine.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from devstack.loopback import LoopbackServer, serve_on_loopback


@dataclass
class UpstreamStandIn:
    username: str
    password: str
    server: LoopbackServer | None = None
    # (target asked for, credentials accepted)
    connects: list[tuple[str, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def targets(self, *, accepted: bool = True) -> list[str]:
        with self.lock:
            return [target for target, ok in self.connects if ok is accepted]


@contextlib.contextmanager
def upstream_proxy(
    username: str, password: str, host: str = "127.0.0.1"
) -> Iterator[UpstreamStandIn]:
    stand_in = UpstreamStandIn(username, password)
    expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_CONNECT(self) -> None:
            target = self.path
            accepted = self.headers.get("Proxy-Authorization") == expected
            with stand_in.lock:
                stand_in.connects.append((target, accepted))
            if not accepted:
                self.send_response(407)
                self.send_header("Proxy-Authenticate", 'Basic realm="stand-in"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            address, _, port = target.rpartition(":")
            address = address.strip("[]")
            if not ipaddress.ip_address(address).is_loopback:
                self.send_error(403, "the stand-in only tunnels to loopback")
                return
            try:
                upstream = socket.create_connection((address, int(port)), timeout=5)
            except OSError:
                self.send_error(502)
                return
            self.send_response(200, "Connection Established")
            self.end_headers()
            self.close_connection = True
            _tunnel(self.connection, upstream)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    stand_in.server = serve_on_loopback(Handler, "upstream-proxy", host=host)
    try:
        yield stand_in
    finally:
        stand_in.server.stop()


def _tunnel(client: socket.socket, upstream: socket.socket) -> None:
    sockets = [client, upstream]
    try:
        while True:
            readable, _, _ = select.select(sockets, [], [], 30)
            if not readable:
                return
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                (upstream if sock is client else client).sendall(data)
    except OSError:
        return
    finally:
        upstream.close()
