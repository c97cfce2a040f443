"""The egress proxy always answers a plain-http request it sent on: a site that records a
posted order and then closes, resets or never answers gets the browser a 502 / 504 from the
proxy, never a closed connection. Chromium sends a request again, a form's POST included,
when a connection it took for reusable closes before any answer (docs/irreversible-steps.md),
which would place the order twice.

Sites here are asyncio servers on 127.0.0.1; the proxy only ever dials loopback.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from browser_task.egress.guard import EgressPolicy
from browser_task.egress.http import KIND_HEADER
from browser_task.egress.proxy import EgressProxy, Streams
from tests.worker.test_ssrf import LoopbackOnlyConnector, TableResolver

Site = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
ORDER = "x=1"


async def post_through_proxy(site: Site, **proxy_options: Any) -> tuple[bytes, int]:
    """POST an order through the proxy to ``site``: (what the browser got, orders received)."""
    received: list[bytes] = []

    async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"\r\n\r\n") + await reader.readexactly(3))
        await site(reader, writer)

    server = await asyncio.start_server(recording, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy_options.setdefault("connect", LoopbackOnlyConnector())
    proxy = EgressProxy(EgressPolicy(allow_loopback=True), TableResolver(), **proxy_options)
    await proxy.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(
            f"POST http://127.0.0.1:{port}/shop/orders HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Length: {len(ORDER)}\r\n\r\n{ORDER}".encode()
        )
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        return answer, len(received)
    finally:
        await proxy.close()
        server.close()


def assert_proxy_answered(answer: bytes, status: int) -> None:
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    assert f"{KIND_HEADER}: unreachable".encode() in answer
    assert b"Connection: close" in answer


async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()  # recorded, never answered


async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()  # an RST, not a FIN


async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # holds the connection until the proxy gives up
    writer.close()


def test_a_site_that_closes_without_answering_gets_the_browser_a_502_not_a_resend() -> None:
    answer, orders = asyncio.run(post_through_proxy(close))
    assert_proxy_answered(answer, 502)
    assert orders == 1


def test_a_site_that_resets_after_recording_gets_the_browser_a_502() -> None:
    answer, orders = asyncio.run(post_through_proxy(reset))
    assert_proxy_answered(answer, 502)
    assert orders == 1


def test_a_site_that_never_answers_gets_the_browser_a_504_after_the_idle_timeout() -> None:
    answer, orders = asyncio.run(post_through_proxy(never_answer, idle_timeout_s=0.5))
    assert_proxy_answered(answer, 504)
    assert orders == 1


class ClosedSiteWriter:
    """The writer of a site connection that is gone when the request is sent to it."""

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        raise ConnectionResetError("the site reset the connection")

    def close(self) -> None:
        pass


def test_a_site_gone_while_the_request_is_sent_is_still_an_answer() -> None:
    async def gone(address: str, port: int) -> Streams:
        reader = asyncio.StreamReader()
        reader.feed_eof()
        return reader, ClosedSiteWriter()  # type: ignore[return-value]

    async def go() -> bytes:
        proxy = EgressProxy(EgressPolicy(allow_loopback=True), TableResolver(), connect=gone)
        await proxy.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"POST http://127.0.0.1:9/shop/orders HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 30)
            writer.close()
            return answer
        finally:
            await proxy.close()

    assert_proxy_answered(asyncio.run(go()), 502)


def test_an_answer_whose_head_is_beyond_the_proxys_limit_is_passed_on_not_a_502() -> None:
    big = b"a" * 100_000  # more than the proxy reads as one head; Chromium allows 256 KiB

    async def confirm(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nX-Big: " + big + b"\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    answer, orders = asyncio.run(post_through_proxy(confirm))
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer[:100]
    assert answer.endswith(b"\r\n\r\nok") and big in answer
    assert orders == 1
