"""The gateway's HTTP/1.1 server on loopback: framing, limits and timeouts, then the apps.

Each connection has its own thread, and the apps invoke Lambda functions that run in their
own processes, so a slow request never holds up another. What API Gateway's front end does
before any Lambda runs is done here: a malformed request line, ``Content-Length`` or chunked
body is a 400, a body over 10 MB is a 413, a client that stops sending mid-request, or sends
its headers a byte at a time, is timed out. Every error the server writes is a full HTTP/1.1
response with a JSON body (``{"message": ...}``), like API Gateway's own, and never echoes
what the client sent.

The server hosts "apps" (objects with ``matches`` and ``handle``) so the WebSocket API can
be mounted on the same server later.
"""

from __future__ import annotations

import io
import logging
import re
import socket
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from devstack.gateway.events import MAX_PAYLOAD_BYTES, HttpRequest, HttpResponse, gateway_error
from devstack.loopback import LoopbackServer

log = logging.getLogger("devstack")

# API Gateway documents no limit for a client that stalls mid-request. 30 s is the scale of
# its 29 s integration timeout: a stalled client holds a thread no longer than a slow Lambda.
READ_TIMEOUT_S = 30.0
# The request line and headers must be whole this long after their first byte. The read
# timeout alone is per read, so a client sending one byte every few seconds held its
# thread forever. A real client writes its request head at once; 10 s is that plus a
# loaded machine's slack, and bounds what a trickling client can hold.
HEADERS_TIMEOUT_S = 10.0
_DIGITS = re.compile(r"[0-9]{1,20}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,16}")


class App(Protocol):
    def matches(self, request: HttpRequest) -> bool: ...

    def handle(self, request: HttpRequest) -> HttpResponse: ...


class _Refused(Exception):
    """A request the server answers itself, then closes the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _ClientGone(Exception):
    """The client closed the connection mid-request: there is no one to answer."""


class _HeadDeadline(io.RawIOBase):
    """The connection's reads, with one deadline for a request's line and headers, counted
    from their first byte (``start``); between requests and for bodies, the read timeout."""

    def __init__(self, sock: socket.socket, timeout_s: float) -> None:
        self._sock = sock
        self._timeout_s = timeout_s
        self._reading_head = False
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def start(self) -> None:
        self._reading_head, self.deadline = True, None

    def stop(self, read_timeout_s: float) -> None:
        self._reading_head, self.deadline = False, None
        self._sock.settimeout(read_timeout_s)

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("request headers not complete in time")
            self._sock.settimeout(remaining)
        count = self._sock.recv_into(buffer)
        if self._reading_head and self.deadline is None and count:
            self.deadline = time.monotonic() + self._timeout_s
        return count


class _HttpHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Until a request line names its version, answers are HTTP/1.1 (http.server's default,
    # HTTP/0.9, writes a bare body with no status line).
    default_request_version = "HTTP/1.1"
    server_version = "pagefleet-local-gateway/1"
    # Headers and body go out in separate writes; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms per response on loopback).
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        # Applies to every read: an idle keep-alive, a body; the head also has its deadline.
        self.connection.settimeout(self.server.read_timeout_s)
        self._head = _HeadDeadline(self.connection, self.server.headers_timeout_s)
        self.rfile.close()  # the socket's own reader: its reference would keep it open
        self.rfile = io.BufferedReader(self._head)

    def handle_one_request(self) -> None:
        self._head.start()
        # What an answer needs before (or without) a parsed request line.
        self.command, self.requestline = "", ""
        self.request_version = self.default_request_version
        super().handle_one_request()  # reads the head, then calls do_<METHOD>
        if self._head.deadline is not None and time.monotonic() >= self._head.deadline:
            # Part of a head came, not all of it in time (http.server just hangs up).
            self.close_connection = True
            self._write(gateway_error(408, "Request Timeout"))
        self._head.stop(self.server.read_timeout_s)

    def parse_request(self) -> bool:
        raw: bytes = getattr(self, "raw_requestline", b"")  # set by handle_one_request
        if len(raw.split()) == 2:
            # An HTTP/0.9 request ("GET /"): API Gateway speaks HTTP/1.1 and up only.
            self.send_error(400)
            return False
        parsed = super().parse_request()  # reads the headers
        self._head.stop(self.server.read_timeout_s)
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        return

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line, headers too long...) as JSON.

        Its messages quote the request line; the answer names the status only, so nothing
        the client sent is echoed back."""
        self.close_connection = True
        self._write(gateway_error(code, self.responses.get(code, ("Error",))[0]))

    def _serve(self) -> None:
        try:
            body = self._read_body()
        except _ClientGone:
            self.close_connection = True
            return
        except _Refused as refused:
            # Where this body ends is unknown (or it never came): the connection cannot carry
            # another request, so the answer closes it.
            self.close_connection = True
            self._write(gateway_error(refused.status, refused.message))
            return
        request = HttpRequest(
            method=self.command,
            raw_path=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
        )
        app = next((a for a in self.server.apps if a.matches(request)), None)
        try:
            if app is None:
                response = gateway_error(403, "Missing Authentication Token")
            else:
                response = app.handle(request)
        except Exception:
            log.exception("local gateway: %s %s failed", self.command, self.path)
            response = gateway_error(500, "Internal server error")
        self._write(response)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

    # --- reading -----------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        deadline = time.monotonic() + self.server.read_timeout_s
        encodings = self.headers.get_all("Transfer-Encoding") or []
        lengths = self.headers.get_all("Content-Length") or []
        try:
            if encodings:
                if lengths:
                    # Both framings at once is how requests get smuggled: refuse it.
                    raise _Refused(400, "Bad Request: Content-Length with Transfer-Encoding")
                if [e.strip().lower() for e in encodings] != ["chunked"]:
                    raise _Refused(400, "Bad Request: unsupported Transfer-Encoding")
                return self._read_chunked(deadline)
            length = _content_length(lengths)
            if length > MAX_PAYLOAD_BYTES:
                raise _Refused(413, "Request Entity Too Large")
            return self._read_exact(length, deadline)
        except TimeoutError:
            # Answered (not just dropped): a client that sees a reset cannot tell whether
            # its request ran and might resend a POST; a 408 says it never reached the API.
            raise _Refused(408, "Request Timeout") from None
        finally:
            self.connection.settimeout(self.server.read_timeout_s)

    def _remaining(self, deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.connection.settimeout(remaining)
        return remaining

    def _read_exact(self, size: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < size:
            self._remaining(deadline)
            chunk = self.rfile.read1(min(size - len(data), 1 << 16))
            if not chunk:
                raise _ClientGone
            data += chunk
        return bytes(data)

    def _read_line(self, deadline: float) -> bytes:
        self._remaining(deadline)
        line = self.rfile.readline(1 << 16)
        if not line:
            raise _ClientGone
        if not line.endswith(b"\n"):
            raise _Refused(400, "Bad Request: chunk line too long")
        return line

    def _read_chunked(self, deadline: float) -> bytes:
        body = bytearray()
        while True:
            size_text = self._read_line(deadline).split(b";", 1)[0].strip().decode("latin-1")
            if not _HEX.fullmatch(size_text):
                raise _Refused(400, "Bad Request: malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                while self._read_line(deadline).strip():  # trailers, up to the blank line
                    pass
                return bytes(body)
            if len(body) + size > MAX_PAYLOAD_BYTES:
                raise _Refused(413, "Request Entity Too Large")
            body += self._read_exact(size, deadline)
            if self._read_line(deadline).strip():
                raise _Refused(400, "Bad Request: malformed chunk")

    # --- writing -----------------------------------------------------------------------------
    def _write(self, response: HttpResponse) -> None:
        try:
            self.send_response(response.status)
            for name, value in response.headers:
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
        except OSError:  # the client went away while we answered
            self.close_connection = True


def _content_length(values: Sequence[str]) -> int:
    """The body length, from one value or repeats of the same one (RFC 9110 8.6)."""
    if not values:
        return 0
    texts = {part.strip() for value in values for part in value.split(",")}
    if len(texts) != 1 or not _DIGITS.fullmatch(next(iter(texts))):
        raise _Refused(400, "Bad Request: invalid Content-Length")
    return int(next(iter(texts)))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many clients connect at once in the benchmarks
    apps: Sequence[App]
    read_timeout_s: float
    headers_timeout_s: float

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that resets or vanishes is not the server's error: no traceback for it.
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("local gateway: connection from %s dropped", client_address)
            return
        # socketserver calls this from its except block: the exception is sys.exc_info().
        log.error("local gateway: error serving %s", client_address, exc_info=sys.exc_info())


class LocalGateway(LoopbackServer):
    """Serves the given apps on ``http://127.0.0.1:<port>`` (port 0 picks a free one)."""

    def __init__(
        self,
        apps: Sequence[App],
        port: int = 8080,
        *,
        sock: socket.socket | None = None,
        read_timeout_s: float = READ_TIMEOUT_S,
        headers_timeout_s: float = HEADERS_TIMEOUT_S,
    ) -> None:
        if sock is None:
            server = _Server(("127.0.0.1", port), _HttpHandler)
        else:  # a held port (devstack.loopback.reserve_loopback_port): serve on it as it is
            server = _Server(sock.getsockname(), _HttpHandler, bind_and_activate=False)
            server.socket.close()
            server.socket = sock
            server.server_name, server.server_port = sock.getsockname()[:2]
        server.apps = list(apps)
        server.read_timeout_s = read_timeout_s
        server.headers_timeout_s = headers_timeout_s
        super().__init__(server, "local-gateway")
