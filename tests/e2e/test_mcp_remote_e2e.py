"""Remote MCP: the agent tools at ``POST /v1/mcp`` (Streamable HTTP, stateless) on the local
stack, driven by the MCP SDK's own streamable HTTP client with a tenant key and nothing
installed: the same tools as over stdio, a session driven in real Chromium, a screenshot as
image content, a wrong step named; no key or a wrong key is refused before any tool runs;
another tenant's session is not found."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from devstack.stack import LocalStack
from pagefleet.agents.catalogue import TOOLS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@contextlib.asynccontextmanager
async def remote(stack: LocalStack, key: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{stack.api_url}/v1/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _body(result: types.CallToolResult) -> dict[str, Any]:
    return dict(json.loads(result.content[0].text))  # type: ignore[union-attr]


def test_an_agent_drives_a_session_through_the_remote_url(stack: LocalStack) -> None:
    assert stack.dev_api_key is not None
    site = stack.site_url

    async def agent() -> dict[str, Any]:
        async with remote(stack, stack.dev_api_key) as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            assert listed == {t.name for t in TOOLS}
            opened = _body(await session.call_tool("open_session", {"idle_timeout_s": 60}))
            sid = opened["session_id"]
            went = await session.call_tool(
                "run_step",
                {
                    "session_id": sid,
                    "step": {"action": "goto", "url": f"{site}/"},
                    "screenshot": True,
                },
            )
            assert not went.is_error, went
            images = [c for c in went.content if isinstance(c, types.ImageContent)]
            assert len(images) == 1 and images[0].mime_type == "image/png"
            typo = await session.call_tool(
                "run_step", {"session_id": sid, "step": {"action": "goto"}}
            )
            assert typo.is_error and _body(typo)["field"] == "step.goto.url"
            await session.call_tool("close_session", {"session_id": sid})
            return _body(went)

    went = anyio.run(agent)
    assert went["observation"]["url"] == f"{site}/"


def test_no_key_a_wrong_key_or_another_tenants_session_gets_nothing(stack: LocalStack) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    url = f"{stack.api_url}/v1/mcp"
    assert httpx2.post(url, json=initialize, headers=accept).status_code == 401
    wrong = {**accept, "Authorization": "Bearer pf_not-a-key"}
    assert httpx2.post(url, json=initialize, headers=wrong).status_code in (401, 403)

    other_key = stack.create_tenant_key("mcp-remote-other")
    with stack.client() as owner:
        sid = owner.open_session(idle_timeout_s=60).session_id

    async def probe() -> dict[str, Any]:
        async with remote(stack, other_key) as session:
            result = await session.call_tool("observe", {"session_id": sid})
            assert result.is_error
            return _body(result)

    try:
        assert anyio.run(probe)["status"] == 404
    finally:
        with stack.client() as owner:
            owner.close_session(sid)
