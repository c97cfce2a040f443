"""The local WebSocket API: API Gateway's WebSocket front end on loopback (``websockets``).

The handshake becomes a ``$connect`` event for the live function (a non-200 answer refuses
the connection with that status); each message is routed by ``$request.body.action`` and
its route's response (``body``) goes back to the client; a close (either side's) becomes
``$disconnect``. Like API Gateway, it closes a connection idle for ``idle_timeout_s`` (10
minutes) and any connection after ``max_age_s`` (2 hours), with close code 1001, and takes
messages up to 128 KB. ``post`` and ``close`` are what the ``@connections`` management
endpoint (``devstack.websocket.management``) calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from devstack.websocket.events import (
    connect_event,
    disconnect_event,
    message_event,
    new_connection_id,
    select_route,
)

log = logging.getLogger("devstack")

IDLE_TIMEOUT_S = 600.0
MAX_AGE_S = 7200.0
MAX_MESSAGE_BYTES = 128 * 1024
GOING_AWAY = 1001

# Invokes the live function with an event; returns its result (raises on a function error).
Invoke = Callable[[dict[str, Any]], Any]


class Gone(Exception):
    """No such connection (API Gateway's 410 GoneException)."""


@dataclass
class _Client:
    connection_id: str
    socket: ServerConnection
    connected_at: float
    source_ip: str
    user_agent: str | None
    last_active: float = field(default_factory=time.time)


class LocalWebSocketApi:
    """Serves ``ws://127.0.0.1:<port>/<stage>`` on its own thread and event loop."""

    def __init__(
        self,
        invoke: Invoke,
        *,
        port: int = 0,
        sock: socket.socket | None = None,
        stage: str = "live",
        api_id: str = "localws",
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        self._invoke = invoke
        self._port = port
        self._sock = sock  # a held port (devstack.loopback.reserve_loopback_port) wins
        self.stage = stage
        self.api_id = api_id
        self.idle_timeout_s = idle_timeout_s
        self.max_age_s = max_age_s
        self._clients: dict[str, _Client] = {}
        self._pending: dict[int, tuple[str, float]] = {}  # socket id -> (connection id, at)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None

    # --- addresses ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/{self.stage}"

    # --- start and stop ----------------------------------------------------------------------
    def start(self) -> LocalWebSocketApi:
        self._thread = threading.Thread(target=self._main, name="local-websocket", daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"the local WebSocket API did not start: {self._error}")
        return self

    def stop(self) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        where: dict[str, Any] = (
            {"sock": self._sock}
            if self._sock is not None
            else {"host": "127.0.0.1", "port": self._port}
        )
        async with serve(
            self._handle,
            **where,
            process_request=self._connect,
            max_size=MAX_MESSAGE_BYTES,
            # Protocol pings keep the TCP path alive; they do not count as activity below.
            ping_interval=20,
            ping_timeout=20,
            server_header=None,
        ) as server:
            self._server = server
            watchdog = asyncio.create_task(self._watch_limits())
            self._ready.set()
            await self._stopped.wait()
            watchdog.cancel()
            for client in list(self._clients.values()):
                with contextlib.suppress(Exception):
                    await client.socket.close(GOING_AWAY, "stack stopping")

    # --- API Gateway's side ------------------------------------------------------------------
    def _where(
        self, connection_id: str, client: _Client | None, at: float, ip: str, ua: str | None
    ) -> dict[str, Any]:
        return {
            "api_id": self.api_id,
            "stage": self.stage,
            "domain": f"127.0.0.1:{self.port}",
            "connected_at_ms": int((client.connected_at if client else at) * 1000),
            "source_ip": client.source_ip if client else ip,
            "user_agent": client.user_agent if client else ua,
        }

    async def _call(self, event: dict[str, Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, self._invoke, event)

    async def _connect(self, socket: ServerConnection, request: Request) -> Response | None:
        parts = urlsplit(request.path)
        if parts.path.rstrip("/") != f"/{self.stage}":
            return socket.respond(HTTPStatus.FORBIDDEN, '{"message": "Forbidden"}\n')
        connection_id = new_connection_id()
        now = time.time()
        ip = str(socket.remote_address[0]) if socket.remote_address else "127.0.0.1"
        user_agent = request.headers.get("User-Agent")
        event = connect_event(
            connection_id,
            headers=list(request.headers.raw_items()),
            query=parse_qs(parts.query, keep_blank_values=True),
            **self._where(connection_id, None, now, ip, user_agent),
        )
        try:
            result = await self._call(event)
        except Exception as exc:
            log.warning("live $connect failed: %s", exc)
            return _refusal(socket, 500, '{"message": "Internal server error"}')
        status = int((result or {}).get("statusCode", 500)) if isinstance(result, dict) else 500
        if status != 200:
            return _refusal(socket, status, str((result or {}).get("body") or ""))
        self._pending[id(socket)] = (connection_id, now)
        return None

    async def _handle(self, socket: ServerConnection) -> None:
        connection_id, connected_at = self._pending.pop(id(socket))
        ip = str(socket.remote_address[0]) if socket.remote_address else "127.0.0.1"
        client = _Client(
            connection_id,
            socket,
            connected_at,
            ip,
            socket.request.headers.get("User-Agent") if socket.request else None,
        )
        self._clients[connection_id] = client
        try:
            async for data in socket:
                client.last_active = time.time()
                route = select_route(data)
                event = message_event(
                    connection_id, route, data, **self._where(connection_id, client, 0, ip, None)
                )
                try:
                    result = await self._call(event)
                except Exception as exc:
                    log.warning("live route %s failed: %s", route, exc)
                    await socket.send(json.dumps({"message": "Internal server error"}))
                    continue
                body = result.get("body") if isinstance(result, dict) else None
                if body:
                    await socket.send(body if isinstance(body, str) else json.dumps(body))
        except ConnectionClosed:
            pass
        finally:
            self._clients.pop(connection_id, None)
            code = socket.close_code or 1006
            event = disconnect_event(
                connection_id,
                status_code=code,
                reason=socket.close_reason or "",
                **self._where(connection_id, client, 0, ip, None),
            )
            with contextlib.suppress(Exception):
                await self._call(event)

    async def _watch_limits(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.idle_timeout_s / 4))
            now = time.time()
            for client in list(self._clients.values()):
                idle = now - client.last_active >= self.idle_timeout_s
                old = now - client.connected_at >= self.max_age_s
                if idle or old:
                    reason = "idle timeout" if idle else "maximum connection age"
                    with contextlib.suppress(Exception):
                        await client.socket.close(GOING_AWAY, reason)

    # --- the management API's side (called from other threads) -------------------------------
    def _run(self, coro: Any, timeout: float = 10) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def post(self, connection_id: str, data: bytes) -> None:
        client = self._clients.get(connection_id)
        if client is None:
            raise Gone(connection_id)
        try:
            message: str | bytes = data.decode("utf-8")
        except UnicodeDecodeError:
            message = data
        try:
            self._run(client.socket.send(message))
        except ConnectionClosed:
            raise Gone(connection_id) from None

    def close(self, connection_id: str) -> None:
        client = self._clients.get(connection_id)
        if client is None:
            raise Gone(connection_id)
        self._run(client.socket.close(GOING_AWAY, "closed by the server"))

    def describe(self, connection_id: str) -> dict[str, Any]:
        client = self._clients.get(connection_id)
        if client is None:
            raise Gone(connection_id)
        return {
            "ConnectedAt": _iso(client.connected_at),
            "LastActiveAt": _iso(client.last_active),
            "Identity": {"SourceIp": client.source_ip, "UserAgent": client.user_agent},
        }


def _refusal(socket: ServerConnection, status: int, body: str) -> Response:
    response = socket.respond(HTTPStatus(status), body or HTTPStatus(status).phrase)
    response.headers = Headers(
        {"Content-Type": "application/json", "Content-Length": str(len(response.body))}
    )
    return response


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
