"""The agent tools over MCP's Streamable HTTP transport, stateless, one HTTP request at a
time: what ``POST /v1/mcp`` answers (``functions/api/routes/mcp.py``).

The MCP SDK's own transport (``StreamableHTTPSessionManager``, stateless, JSON answers) is
given the request as an ASGI call and its answer collected, so the protocol (initialize,
``tools/list``, ``tools/call``, notifications answered 202, a GET refused) is the SDK's,
not a copy. Each request builds its server: no session outlives a request, as API
Gateway's REST API and a Lambda function would not keep one anyway.

API Gateway ends an integration after 29 seconds, so a tool waits at most
``REMOTE_WAIT_S`` here (a job's end, a step's answer), then answers with what it has and a
``next`` saying to call again.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from pagefleet.agents import REMOTE_WAIT_S
from pagefleet.agents.server import build_server
from pagefleet.client import PagefleetClient

PATH = "/v1/mcp"


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


async def _asgi(
    manager: StreamableHTTPSessionManager, method: str, headers: Mapping[str, str], body: bytes
) -> HttpAnswer:
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 443),
    }
    answered = anyio.Event()
    given = False
    status = 500
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client "disconnects" once it has its answer
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for key, value in message.get("headers", []):
                out_headers[key.decode().lower()] = value.decode()
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return HttpAnswer(status, out_headers, b"".join(chunks))


def answer(
    client: PagefleetClient, *, method: str, headers: Mapping[str, str], body: bytes
) -> HttpAnswer:
    """One MCP request over HTTP, answered with the tools acting through ``client``."""
    server = build_server(client, wait_s=REMOTE_WAIT_S)
    manager = StreamableHTTPSessionManager(server, stateless=True, json_response=True)
    return anyio.run(_asgi, manager, method, headers, body)
