"""What the local Lambda service and an execution environment say to each other.

Each message is one frame: a 4-byte big-endian length, then that many bytes of JSON.
Environment -> service: ``{"ready": pid}`` or ``{"init_error": {...}}`` once, after importing
the handler (Lambda's init phase); then one reply per invocation, ``{"result": ...}`` or
``{"error": {"errorType", "errorMessage"}}``. Service -> environment: ``{"event", "context"}``.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION

_HEADER = struct.Struct(">I")
# Far above Lambda's own 6 MB payload limits: a frame this long is a broken peer.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Lambda's synchronous invocation limit, for the request and the response payload.
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


class InvokeError(Exception):
    """An invocation that did not return a result, named as Lambda names it."""

    error_type = "Runtime.Unknown"

    def __init__(self, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_type is not None:
            self.error_type = error_type


class FunctionError(InvokeError):
    """The handler raised (or could not be imported): Lambda's "Unhandled" function error."""

    error_type = "Exception"


class RuntimeExitError(InvokeError):
    """The execution environment died during the invocation."""

    error_type = "Runtime.ExitError"


class InvokeTimeout(InvokeError):
    """No result within the timeout; the environment was stopped."""

    error_type = "Sandbox.Timedout"


class PayloadTooLarge(InvokeError):
    """The event is over Lambda's invocation payload limit; nothing ran."""

    error_type = "RequestEntityTooLargeException"


def encode(message: Any) -> bytes:
    """JSON as Lambda carries it; ``TypeError`` / ``ValueError`` for what JSON cannot hold."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()


def send_frame(sock: socket.socket, message: Any, deadline: float | None = None) -> None:
    send_encoded(sock, encode(message), deadline)


def send_encoded(sock: socket.socket, data: bytes, deadline: float | None = None) -> None:
    _set_timeout(sock, deadline)
    sock.sendall(_HEADER.pack(len(data)) + data)


def recv_frame(sock: socket.socket, deadline: float | None = None) -> Any:
    """The next message; ``EOFError`` when the peer is gone, ``TimeoutError`` at the deadline."""
    (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline))
    if length > MAX_FRAME_BYTES:
        raise EOFError(f"frame of {length} bytes")
    return json.loads(_recv_exact(sock, length, deadline))


def _set_timeout(sock: socket.socket, deadline: float | None) -> None:
    if deadline is None:
        sock.settimeout(None)
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    sock.settimeout(remaining)


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    buffer = bytearray()
    while len(buffer) < size:
        _set_timeout(sock, deadline)
        try:
            chunk = sock.recv(min(size - len(buffer), 1 << 20))
        except ConnectionResetError as exc:
            raise EOFError("connection reset") from exc
        if not chunk:
            raise EOFError("peer closed the connection")
        buffer += chunk
    return bytes(buffer)


class LambdaContext:
    """The context object handlers (and Powertools) read, as Lambda's Python runtime gives it."""

    def __init__(
        self,
        function_name: str,
        *,
        request_id: str,
        timeout_s: float,
        memory_mb: int = 512,
        log_stream_name: str = "local",
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = (
            f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT}:function:{function_name}"
        )
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = log_stream_name
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))

    def wire(self) -> dict[str, Any]:
        """What an execution environment needs to rebuild this context on its side."""
        return {
            "function_name": self.function_name,
            "request_id": self.aws_request_id,
            "remaining_ms": self.get_remaining_time_in_millis(),
            "memory_mb": self.memory_limit_in_mb,
            "log_stream_name": self.log_stream_name,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> LambdaContext:
        return cls(
            str(data["function_name"]),
            request_id=str(data["request_id"]),
            timeout_s=float(data["remaining_ms"]) / 1000,
            memory_mb=int(data["memory_mb"]),
            log_stream_name=str(data["log_stream_name"]),
        )
