"""The agent tools that reach a session's surroundings (its list, its files, a person), called
as the MCP server calls them (``AgentTools.call``) through the real authorizer and API
handlers on moto: what each answers, and each wrong argument refused naming it and what to
do. No worker runs here: the sessions stay ``starting``; tests/e2e/test_mcp_e2e.py drives
them in Chromium."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
from pagefleet.agents.tools import AgentTools, ToolRefusal
from pagefleet.browsing.models import Answer
from pagefleet.client import PagefleetClient
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import gateway_transport


def _tools(api_env: Provisioned, tenant: str, *, wait_s: int | None = None) -> Iterator[AgentTools]:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), tenant)
    client = PagefleetClient("http://gateway.test", key, transport=gateway_transport())
    try:
        yield AgentTools(client, wait_s=wait_s)
    finally:
        client.close()


@pytest.fixture
def agent(api_env: Provisioned) -> Iterator[AgentTools]:
    yield from _tools(api_env, "mcp-tools-a")


@pytest.fixture
def remote(api_env: Provisioned) -> Iterator[AgentTools]:
    """As ``POST /v1/mcp`` builds them: a call waits a short while only (there 20 s)."""
    yield from _tools(api_env, "mcp-tools-a", wait_s=1)


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


def test_upload_file_refuses_a_file_too_large_or_not_base64_naming_content(
    agent: AgentTools,
) -> None:
    sid = agent.call("open_session", {}).body["session_id"]
    given = {"session_id": sid, "selector": "#f", "name": "a.bin"}
    large = refused(agent, "upload_file", **given, content="x" * 100_001)
    assert (large.field, large.status) == ("content", 422)
    assert "at most 100000" in large.message
    wrong = refused(agent, "upload_file", **given, content="not base64!", encoding="base64")
    assert wrong.field == "content" and "base64" in wrong.message
    assert "encoding text" in wrong.next
    missing = refused(agent, "upload_file", session_id=sid, name="a.txt", content="hi")
    assert missing.field == "selector" and "required" in missing.message


def test_one_call_carrying_files_past_the_commands_bound_is_a_422_naming_steps(
    agent: AgentTools,
) -> None:
    """Each file of an upload step may be 100,000 characters; a command's steps are kept
    twice in its DynamoDB record (400 KB an item), so one call's steps are bounded too."""
    sid = agent.call("open_session", {}).body["session_id"]
    upload = {"action": "upload", "selector": "#f", "filename": "a.txt", "content": "x" * 99_000}
    too_many = refused(agent, "run_step", session_id=sid, steps=[upload, upload])
    assert (too_many.status, too_many.field) == (422, "steps")
    assert "at most 120000 bytes" in too_many.message and "run_step again" in too_many.next


def test_get_file_lists_none_before_a_step_made_one_and_names_what_it_lacks(
    agent: AgentTools, other: AgentTools
) -> None:
    sid = agent.call("open_session", {}).body["session_id"]
    assert agent.call("get_file", {"session_id": sid}).body == {"files": []}
    absent = refused(agent, "get_file", session_id=sid, name="prices.csv")
    assert (absent.field, absent.status) == ("name", 404)
    assert "it made: none yet" in absent.message and "download" in absent.next
    stranger = refused(other, "get_file", session_id=sid)
    assert stranger.status == 404 and "open_session" in stranger.next


def test_await_human_is_bounded_like_the_step_and_names_a_wrong_argument(
    agent: AgentTools,
) -> None:
    sid = agent.call("open_session", {}).body["session_id"]
    long = refused(agent, "await_human", session_id=sid, prompt="Solve it", timeout_s=3601)
    assert (long.field, long.status) == ("timeout_s", 422)
    assert "less than or equal to 3600" in long.message
    silent = refused(agent, "await_human", session_id=sid)
    assert silent.field == "prompt" and "await_human again" in silent.next


def test_remote_await_human_says_it_still_waits_and_is_waited_on_by_its_command(
    remote: AgentTools, api_env: Provisioned
) -> None:
    """A remote call cannot wait for a person: it answers ``waiting_for_human`` with the
    command to wait on; calling again with it waits on the same ask (the person is asked
    once, however often the agent looks), and answers the person's note once they continued."""
    sid = remote.call("open_session", {}).body["session_id"]
    ask = {"session_id": sid, "prompt": "Solve the CAPTCHA", "timeout_s": 600}
    first = remote.call("await_human", ask)
    assert not first.failed and first.body["state"] == "waiting_for_human"
    command_id = first.body["command_id"]
    assert command_id in first.body["next"] and "await_human again" in first.body["next"]
    again = remote.call("await_human", {**ask, "command_id": command_id})
    assert again.body["state"] == "waiting_for_human" and again.body["command_id"] == command_id
    ledger = DynamoCommandLedger(RUNTIME.client("dynamodb"), api_env.jobs_table)
    assert [c.command_id for c in ledger.session_commands("mcp-tools-a", sid)] == [command_id]
    # Another ask under that command is refused naming it, not run as a second one.
    other_ask = refused(
        remote, "await_human", **{**ask, "prompt": "Other", "command_id": command_id}
    )
    assert other_ask.status == 409 and other_ask.field == "command_id"

    # The worker ran the step and the person continued it with a note.
    claim = ledger.claim("mcp-tools-a", sid, command_id, now=time.time(), order="1")
    assert claim.verdict == "run"
    note = {"human_note": "solved it"}
    ledger.finish("mcp-tools-a", sid, command_id, Answer(id=command_id, ran=1, result=note), [])
    done = remote.call("await_human", {**ask, "command_id": command_id})
    assert not done.failed and done.body["ok"] and done.body["result"] == note
