"""The agent tools that reach a session's surroundings (its list, its files, a person), called
as the MCP server calls them (``AgentTools.call``) through the real authorizer and API
handlers on moto: what each answers, and each wrong argument refused naming it and what to
do. No worker runs here: the sessions stay ``starting``; tests/e2e/test_mcp_e2e.py drives
them in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.provision import Provisioned
from pagefleet.agents.tools import AgentTools, ToolRefusal
from pagefleet.client import PagefleetClient
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import gateway_transport


def _tools(api_env: Provisioned, tenant: str) -> Iterator[AgentTools]:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), tenant)
    client = PagefleetClient("http://gateway.test", key, transport=gateway_transport())
    try:
        yield AgentTools(client)
    finally:
        client.close()


@pytest.fixture
def agent(api_env: Provisioned) -> Iterator[AgentTools]:
    yield from _tools(api_env, "mcp-tools-a")


@pytest.fixture
def other(api_env: Provisioned) -> Iterator[AgentTools]:
    yield from _tools(api_env, "mcp-tools-b")


def refused(agent: AgentTools, tool: str, **arguments: Any) -> ToolRefusal:
    with pytest.raises(ToolRefusal) as caught:
        agent.call(tool, arguments)
    assert caught.value.next, caught.value  # every refusal says what to do next
    return caught.value


def test_list_sessions_shows_this_keys_open_sessions_only(
    agent: AgentTools, other: AgentTools
) -> None:
    mine = [agent.call("open_session", {"idle_timeout_s": 60}).body["session_id"] for _ in "ab"]
    theirs = other.call("open_session", {}).body["session_id"]
    listed = agent.call("list_sessions", {}).body["sessions"]
    assert [s["session_id"] for s in listed] == sorted(mine, reverse=True)  # newest first
    assert {s["status"] for s in listed} == {"starting"}
    assert all("cost_usd" in s and s["idle_timeout_s"] == 60 for s in listed)
    assert agent.call("list_sessions", {"status": "ready"}).body == {"sessions": []}
    agent.call("close_session", {"session_id": mine[0]})
    assert [s["session_id"] for s in agent.call("list_sessions", {}).body["sessions"]] == [mine[1]]
    assert theirs not in str(agent.call("list_sessions", {}).body)


def test_list_sessions_refuses_a_status_it_does_not_list(agent: AgentTools) -> None:
    wrong = refused(agent, "list_sessions", status="closed")
    assert (wrong.field, wrong.status) == ("status", 422)
    assert "'open'" in wrong.message and "list_sessions again" in wrong.next
    unknown = refused(agent, "list_sessions", limit=5)
    assert unknown.field == "limit" and "list_sessions takes status" in unknown.message
