"""The egress filter: a small forwarding proxy every byte of the browser's traffic goes through.

Chromium is launched with ``--proxy-server`` pointing here (and ``<-loopback>`` so loopback is
not bypassed), so page loads, subresources, redirects, fetch/XHR, WebSockets and service
workers all arrive as either

- ``CONNECT host:port`` (https, wss, and ws: Chromium tunnels WebSockets), or
- an absolute-URI request ``GET http://host:port/path HTTP/1.1`` (plain http).

For each one the proxy resolves the host itself, checks EVERY resolved address with the
``EgressPolicy``, then connects to one checked address itself. Nothing resolves the name a
second time, so DNS rebinding cannot swap the address between check and connect. A refusal
is a 403 carrying ``X-Pagefleet-Egress-Reason`` and is logged (host, port, reason; never a
payload).

Plain http is forwarded one request per client connection (``Connection: close`` both ways):
the proxy never has to parse message bodies, and a kept-alive connection can never carry a
second request for another host to the first host's address. The browser's side is copied
on only for a request with a body (the copying: ``browser_task.egress.relay``): ~0.75 ms of
the worker's CPU a request (docs/performance.md). A site that closes without answering, or
does not answer within the idle timeout, gets the browser a 502 / 504 from the proxy rather
than a closed connection: Chromium sends a request again, a form's POST included, when a
connection it took for reusable closes before any answer, which would repeat an
irreversible step (docs/irreversible-steps.md).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from browser_task.egress.guard import (
    EgressPolicy,
    Resolver,
    literal_address,
    normalize_host,
    system_resolver,
)
from browser_task.egress.http import (
    UNREACHABLE,
    UNRESOLVED,
    UPSTREAM_AUTH,
    UPSTREAM_REFUSED,
    Refused,
    absolute_target,
    close_writer,
    origin_request,
    reply,
    split_authority,
)
from browser_task.egress.relay import CHUNK, Relay
from pagefleet.jobs.options import ProxyOptions
from pagefleet.specs.pools import PoolProxy

log = logging.getLogger("pagefleet.egress")

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
# (checked IP address, port) -> streams. Injectable so tests can prove what was dialled.
Connector = Callable[[str, int], Awaitable[Streams]]

MAX_HEAD_BYTES = 64 * 1024


async def open_tcp(host: str, port: int) -> Streams:
    return await asyncio.open_connection(host, port, limit=CHUNK)


@dataclass(frozen=True)
class Decision:
    """One verdict of the proxy, kept (bounded) for tests and debugging."""

    at: float
    method: str
    host: str
    port: int
    allowed: bool
    address: str | None = None
    reason: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class UpstreamProxy:
    """Chain to another HTTP proxy AFTER the check: we CONNECT it to the checked address.

    The upstream's own address is checked with the same policy (a job's proxy must not be a
    way to reach the worker's private network), and the proxy connects to the checked one.
    """

    host: str
    port: int
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    # Whose proxy it is, in messages: a job's own, or its pool's (WorkerSettings.egress_proxy).
    label: str = "the job's proxy"

    @classmethod
    def of(cls, proxy: ProxyOptions) -> UpstreamProxy:
        """A job's ``options.proxy`` (rendered: its credentials may be secrets)."""
        return cls(proxy.host, proxy.port, proxy.username, proxy.password)

    @classmethod
    def of_pool(cls, proxy: PoolProxy) -> UpstreamProxy:
        """The pool's egress proxy (its Secrets Manager secret)."""
        return cls(proxy.host, proxy.port, proxy.username, proxy.password, "the pool's proxy")

    def authorization(self) -> str | None:
        if self.username is None and self.password is None:
            return None
        token = f"{self.username or ''}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(token).decode()


class EgressProxy:
    def __init__(
        self,
        policy: EgressPolicy,
        resolver: Resolver | None = None,
        *,
        connect: Connector = open_tcp,
        upstream: UpstreamProxy | None = None,
        on_refusal: Callable[[Decision], None] | None = None,
        max_connections: int = 512,
        head_timeout_s: float = 30.0,
        resolve_timeout_s: float = 10.0,
        connect_timeout_s: float = 15.0,
        idle_timeout_s: float = 120.0,
        decision_log_size: int = 2000,
    ) -> None:
        self.policy = policy
        self._resolve = resolver or system_resolver()
        self._connect = connect
        self._upstream = upstream
        self._upstream_address: str | None = None
        self._slots = asyncio.Semaphore(max_connections)
        self._head_timeout = head_timeout_s
        self._resolve_timeout = resolve_timeout_s
        self._connect_timeout = connect_timeout_s
        self._relay = Relay(idle_timeout_s)
        self.decisions: deque[Decision] = deque(maxlen=decision_log_size)
        # Told of each refusal on the event loop; without it a refusal is a plain log line.
        self._on_refusal = on_refusal
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def refusals(self) -> list[Decision]:
        return [d for d in self.decisions if not d.allowed]

    async def start(self) -> int:
        """Listen on 127.0.0.1, ephemeral port (only this worker's browser talks to it)."""
        self._server = await asyncio.start_server(
            self._on_client, "127.0.0.1", 0, limit=MAX_HEAD_BYTES, backlog=256
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._handlers):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    # --- one client connection ------------------------------------------------------------
    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            if self._slots.locked():
                # Bounded: refuse rather than queue without end (the browser retries).
                await reply(writer, 503, "the egress proxy is at its connection limit", UNREACHABLE)
                return
            async with self._slots:
                await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("egress proxy: unexpected error")
        finally:
            close_writer(writer)
            if task is not None:
                self._handlers.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self._head_timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            await reply(writer, 431, "request head too large")
            return
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            await reply(writer, 400, "malformed request line")
            return
        method = method.upper()
        try:
            if method == "CONNECT":
                host, port = split_authority(target, default_port=443)
                upstream = await self._open(method, host, port)
            else:
                host, port, origin_form = absolute_target(target)
                upstream = await self._open(method, host, port)
        except Refused as refused:
            await reply(writer, refused.status, refused.reason, refused.kind)
            return
        up_reader, up_writer = upstream
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await self._relay.pipe(reader, writer, up_reader, up_writer, rewrite_response=False)
            else:
                request = origin_request(method, origin_form, version, lines[1:])
                try:
                    up_writer.write(request.head)
                    await up_writer.drain()
                except ConnectionError:
                    # Still an answer, not a closed connection (the module's docstring).
                    await reply(writer, 502, "the site closed the connection", UNREACHABLE)
                    return
                if request.upgrade or request.body:
                    await self._relay.pipe(
                        reader, writer, up_reader, up_writer, rewrite_response=not request.upgrade
                    )
                else:  # nothing more comes from the browser: no copier waits on it
                    await self._relay.copy_response(up_reader, writer)
        finally:
            close_writer(up_writer)

    async def _open(self, method: str, host: str, port: int) -> Streams:
        """Check host:port and connect to a checked address, or raise ``Refused``."""
        shown = host[:253]
        address = None
        try:
            address = await self._decide(host, port)
            async with asyncio.timeout(self._connect_timeout):
                opened = await self._dial(address, port)
        except Refused as refused:
            decision = self._record(
                method, shown, port, False, address, refused.reason, refused.kind
            )
            if self._on_refusal is not None:
                self._on_refusal(decision)  # the worker's log, with the job's keys (egress_log)
            else:
                # The line itself names what was refused and why (a plain log shows no extras).
                log.warning(
                    "egress refused %s:%s (%s): %s",
                    shown,
                    port,
                    refused.kind,
                    refused.reason,
                    extra={
                        "host": shown,
                        "port": port,
                        "reason": refused.reason,
                        "kind": refused.kind,
                    },
                )
            raise
        except (OSError, TimeoutError) as exc:
            via = f" through {self._upstream.label}" if self._upstream is not None else ""
            reason = f"could not connect to {host}:{port}{via}: {type(exc).__name__}"
            self._record(method, shown, port, False, address, reason, UNREACHABLE)
            raise Refused(502, reason, UNREACHABLE) from None
        self._record(method, shown, port, True, address, None)
        return opened

    async def _decide(self, raw_host: str, port: int) -> str:
        host = normalize_host(raw_host)
        if not host or not 0 < port < 65536:
            raise Refused(400, f"bad target {raw_host!r}:{port}")
        named = self.policy.host_reason(host)
        if named is not None:
            raise Refused(403, named)
        literal = literal_address(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                async with asyncio.timeout(self._resolve_timeout):
                    addresses = await self._resolve(host)
            except (OSError, TimeoutError) as exc:
                raise Refused(
                    502, f"could not resolve {host}: {type(exc).__name__}", UNRESOLVED
                ) from None
        # Every answer is judged: one private address among public ones refuses the host,
        # since the browser-facing answer is not ours to pick on the attacker's behalf.
        reason = self.policy.addresses_reason(addresses)
        if reason is not None:
            raise Refused(403, f"requests to {host} are not allowed: {reason}")
        return str(addresses[0])

    async def check_upstream(self) -> str | None:
        """The checked address of the upstream proxy (None without one); raises ``Refused``.

        Resolved and judged once per proxy (a job's), so the upstream cannot be rebound
        between connections either.
        """
        upstream = self._upstream
        if upstream is None:
            return None
        if self._upstream_address is None:
            try:
                self._upstream_address = await self._decide(upstream.host, upstream.port)
            except Refused as refused:
                raise Refused(
                    refused.status,
                    f"{upstream.label} {upstream.host}:{upstream.port}: {refused.reason}",
                    refused.kind,
                ) from None
        return self._upstream_address

    async def _dial(self, address: str, port: int) -> Streams:
        upstream = self._upstream
        if upstream is None:
            return await self._connect(address, port)
        upstream_address = await self.check_upstream()
        assert upstream_address is not None
        reader, writer = await self._connect(upstream_address, upstream.port)
        target = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
        authorization = upstream.authorization()
        if authorization is not None:
            head += f"Proxy-Authorization: {authorization}\r\n"
        writer.write((head + "\r\n").encode())
        await writer.drain()
        try:
            async with asyncio.timeout(self._connect_timeout):
                answer = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            close_writer(writer)
            raise Refused(
                502, f"{upstream.label} closed the connection without answering", UNREACHABLE
            ) from None
        status = answer.split(b" ", 2)[1:2]
        if status == [b"200"]:
            return reader, writer
        close_writer(writer)
        code = status[0].decode("latin-1", "replace") if status else "?"
        if code == "407":
            raise Refused(
                502, f"{upstream.label} rejected its credentials (HTTP 407)", UPSTREAM_AUTH
            )
        raise Refused(
            502,
            f"{upstream.label} refused the tunnel to {target} (HTTP {code[:3]})",
            UPSTREAM_REFUSED,
        )

    def _record(
        self,
        method: str,
        host: str,
        port: int,
        allowed: bool,
        address: str | None,
        reason: str | None,
        kind: str | None = None,
    ) -> Decision:
        decision = Decision(time.time(), method, host, port, allowed, address, reason, kind)
        self.decisions.append(decision)
        return decision
