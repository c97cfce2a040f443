"""What a page sends past a plain-http request's head reaches the site whole: the proxy
copies the browser's side on only for a request that says it has a body (RFC 9112, section
6.3), and a request without one gets its answer without the browser closing its side.

Sites here are asyncio servers on 127.0.0.1; the proxy only ever dials loopback.
"""

from __future__ import annotations

import asyncio

import pytest

from browser_task.egress.guard import EgressPolicy
from browser_task.egress.http import origin_request
from browser_task.egress.proxy import EgressProxy
from tests.worker.test_ssrf import LoopbackOnlyConnector, TableResolver

BODY = bytes(range(256)) * 800  # 200 KiB: more than one read of the proxy's


async def through_proxy(head: bytes, parts: list[bytes], body_bytes: int) -> tuple[bytes, bytes]:
    """Send ``head`` then ``parts`` (a pause before each) through the proxy to a site that
    reads the head and ``body_bytes`` more: (what the site got past the head, the answer)."""
    got: list[bytes] = []

    async def site(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        got.append(await reader.readexactly(body_bytes))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(site, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = EgressProxy(
        EgressPolicy(allow_loopback=True), TableResolver(), connect=LoopbackOnlyConnector()
    )
    await proxy.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(head.replace(b"PORT", str(port).encode()))
        for part in parts:
            await asyncio.sleep(0.05)
            writer.write(part)
            await writer.drain()
        # The browser's side stays open, as Chromium's does, until the answer has come.
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        return (got[0] if got else b""), answer
    finally:
        await proxy.close()
        server.close()


def test_a_posted_body_sent_after_its_head_reaches_the_site_whole() -> None:
    head = (
        b"POST http://127.0.0.1:PORT/upload HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n"
        + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
    )
    parts = [BODY[:1000], BODY[1000:150_000], BODY[150_000:]]
    got, answer = asyncio.run(through_proxy(head, parts, len(BODY)))
    assert got == BODY
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"ok")


def test_a_chunked_body_reaches_the_site_whole() -> None:
    chunked = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    head = (
        b"POST http://127.0.0.1:PORT/upload HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    got, answer = asyncio.run(through_proxy(head, [chunked[:9], chunked[9:]], len(chunked)))
    assert got == chunked
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_a_request_without_a_body_is_answered_while_the_browser_keeps_its_side_open() -> None:
    head = b"GET http://127.0.0.1:PORT/a HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n"
    got, answer = asyncio.run(through_proxy(head, [], 0))
    assert got == b""
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"ok")
    assert b"Connection: close" in answer


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ([], False),
        (["Content-Length: 0"], False),
        (["Content-Length: 12"], True),
        (["content-length:  3 "], True),
        (["Transfer-Encoding: chunked"], True),
        (["Upgrade: websocket", "Connection: Upgrade"], False),
    ],
)
def test_a_request_has_a_body_only_when_its_head_says_so(headers: list[str], body: bool) -> None:
    request = origin_request("POST", "/x", "HTTP/1.1", ["Host: a", *headers, ""])
    assert request.body is body
    assert request.upgrade is any(h.startswith("Upgrade") for h in headers)
