"""`pagefleet mcp` driven by the MCP SDK's own client over stdio, against the local stack in
real Chromium: an agent opens a session, navigates the demo site, fills and submits its
form, saves the steps as a workflow and runs it as a job with the same result; another
tenant's session is not found through it either."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from devstack.chaos import wait_until
from devstack.stack import REPO_ROOT, LocalStack
from pagefleet.browsing.models import SessionView
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key


def server(stack: LocalStack, api_key: str | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "pagefleet.cli", "mcp"],
        env={"PAGEFLEET_API_URL": stack.api_url, "PAGEFLEET_API_KEY": api_key or stack.dev_api_key},
        cwd=str(REPO_ROOT),
    )


@contextlib.asynccontextmanager
async def connected(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    """An MCP client session with ``pagefleet mcp``, initialized."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not getattr(result, "is_error", False), result
    return dict(json.loads(result.content[0].text))  # type: ignore[union-attr]


def ended(stack: LocalStack, session_id: str) -> SessionView:
    """The session once it has ended: closing a running session asks its worker to end it,
    so the close an agent's going away triggers lands a moment after the disconnect."""
    with stack.client() as owner:
        return wait_until(
            lambda: (s := owner.get_session(session_id)).status == "closed" and s,
            60,
            what=f"session {session_id} closed",
        )


async def refused(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert getattr(result, "is_error", False), result
    return dict(json.loads(result.content[0].text))  # type: ignore[union-attr]


def test_an_agent_learns_the_contact_form_and_its_workflow_replays_it(stack: LocalStack) -> None:
    site = stack.site_url

    async def agent() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connected(server(stack)) as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert set(listed) >= {
                "open_session",
                "run_step",
                "observe",
                "close_session",
                "save_as_workflow",
                "submit_job",
                "get_job",
            }
            # The step language's schema: the agent's steps are typed as it writes them.
            assert "goto" in json.dumps(listed["run_step"].input_schema["$defs"]["step"])

            opened = await call(session, "open_session", idle_timeout_s=120)
            sid = opened["session_id"]
            went = await call(
                session, "run_step", session_id=sid, step={"action": "goto", "url": f"{site}/"}
            )
            assert went["ok"], went
            seen = await call(session, "observe", session_id=sid)
            assert seen["observation"]["url"] == f"{site}/"
            assert "link" in seen["observation"]["aria_snapshot"]
            steps = [
                {"action": "click", "selector": "a[href='/contact.html']"},
                {"action": "fill", "selector": "#name", "value": "Grace Hopper"},
                {"action": "fill", "selector": "#email", "value": "grace@example.com"},
                {"action": "click", "selector": "#send"},
                {"action": "extract", "name": "reference", "selector": "#reference"},
            ]
            sent = await call(session, "run_step", session_id=sid, steps=steps)
            assert sent["ok"], sent
            assert sent["observation"]["title"] == "Thank you"
            typo = await refused(session, "run_step", session_id=sid, step={"action": "goto"})
            assert (typo["status"], typo["field"]) == (422, "step.goto.url")
            # A step that runs and fails is an error result with the page and what to do.
            missing = {"action": "click", "selector": "#nowhere", "timeout_ms": 500}
            failed = await refused(session, "run_step", session_id=sid, step=missing)
            assert failed["ok"] is False and failed["ran"] == 0, failed
            assert failed["observation"]["title"] == "Thank you"
            assert "fix that step" in failed["next"]
            # A screenshot comes back as an image the model sees, not only as a link.
            shot = await session.call_tool("observe", {"session_id": sid, "screenshot": True})
            images = [c for c in shot.content if isinstance(c, types.ImageContent)]
            assert len(images) == 1 and images[0].mime_type == "image/png", shot.content
            assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
            saved = await call(
                session,
                "save_as_workflow",
                session_id=sid,
                name="agent-contact",
                inputs={"who": "Grace Hopper"},
            )
            assert saved["steps"] == 6
            await call(session, "close_session", session_id=sid)
            job = await call(
                session, "submit_job", workflow="agent-contact", inputs={"who": "Grace Hopper"}
            )
            done = await call(session, "get_job", job_id=job["job_id"], wait_s=120)
            return sent, done

    sent, done = anyio.run(agent)
    assert done["status"] == "succeeded", done
    assert done["result"] == {"reference": sent["result"]["reference"]}


def test_another_tenants_session_is_not_found_through_mcp(stack: LocalStack) -> None:
    assert stack.provisioned is not None
    other_key, _ = create_api_key(
        RUNTIME.tenant_store(stack.provisioned.tenants_table), "mcp-other", name="probe"
    )
    with stack.client() as owner:
        sid = owner.open_session(idle_timeout_s=60).session_id

    async def probe() -> dict[str, Any]:
        async with connected(server(stack, other_key)) as session:
            return await refused(session, "observe", session_id=sid)

    try:
        missing = anyio.run(probe)
        assert missing["status"] == 404
        assert "open_session" in missing["next"]
    finally:
        with stack.client() as owner:
            owner.close_session(sid)


def test_the_sessions_an_agent_left_open_are_closed_when_it_disconnects(stack: LocalStack) -> None:
    """An agent that goes away (its MCP client disconnects) without close_session: the
    sessions it opened through ``pagefleet mcp`` are closed, not left holding a running slot
    and billing until their idle timeout; one it closed itself is not touched again."""

    async def agent() -> tuple[str, str]:
        async with connected(server(stack)) as session:
            left = await call(session, "open_session", idle_timeout_s=600)
            done = await call(session, "open_session", idle_timeout_s=600)
            await call(session, "close_session", session_id=done["session_id"])
            return left["session_id"], done["session_id"]

    with stack.client() as owner:  # what another test of the shared stack may have left
        before = {s.session_id for s in owner.open_sessions()}
    left, done = anyio.run(agent)
    view = ended(stack, left)
    assert view.closed_reason == "closed", view
    with stack.client() as owner:
        assert ended(stack, done).closed_reason == "closed"
        assert [s.session_id for s in owner.open_sessions() if s.session_id not in before] == []


def test_a_terminated_server_closes_the_sessions_its_agent_left_open(stack: LocalStack) -> None:
    """An MCP client that ends ``pagefleet mcp`` with SIGTERM (what the spec has it send when
    the server is still there after its stdin closed; or an operator's kill) while a session
    it opened is open: the session is closed before the server dies, not left billing."""
    params = server(stack)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": types.LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "e2e", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "open_session", "arguments": {"idle_timeout_s": 600}},
        },
    ]
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **(params.env or {})},
        cwd=params.cwd,
        text=True,
    )
    try:
        assert proc.stdin and proc.stdout
        for line in lines:
            proc.stdin.write(json.dumps(line) + "\n")
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
        opened = json.loads(answers[1]["result"]["content"][0]["text"])
        # Its stdin stays open: only the signal tells it to go.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait() == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    view = ended(stack, opened["session_id"])
    assert view.closed_reason == "closed", view


def test_an_agent_reaches_into_an_iframe_by_ref_sees_a_new_tab_and_reads_within_a_budget(
    stack: LocalStack,
) -> None:
    site = stack.site_url

    async def agent() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connected(server(stack)) as session:
            sid = (await call(session, "open_session", idle_timeout_s=120))["session_id"]
            went = await call(
                session,
                "run_step",
                session_id=sid,
                step={"action": "goto", "url": f"{site}/help.html"},
            )
            tree = went["observation"]["aria_snapshot"]
            # The iframe's content is in the snapshot, each element with a ref to act on.
            box = re.search(r'textbox "Your question" \[ref=(\w+)\]', tree)
            ask = re.search(r'button "Ask" \[ref=(\w+)\]', tree)
            assert box and ask, tree
            asked = await call(
                session,
                "run_step",
                session_id=sid,
                steps=[
                    {"action": "fill", "selector": f"aria-ref={box[1]}", "value": "Where is it?"},
                    {"action": "click", "selector": f"aria-ref={ask[1]}"},
                    {
                        "action": "extract",
                        "name": "answer",
                        "selector": "#answer",
                        "frame": "#chat",
                    },
                ],
                diff=True,
            )
            assert asked["result"] == {"answer": "Thanks, we will answer: Where is it?"}, asked
            # Only what changed: the typed value and the answer, not the page again.
            seen = asked["observation"]
            assert seen["aria_diff"] is True, seen
            assert (
                "+ " in seen["aria_snapshot"] and "Thanks, we will answer" in seen["aria_snapshot"]
            )
            assert 'heading "Help"' not in seen["aria_snapshot"]
            assert len(seen["aria_snapshot"]) < seen["aria_chars"]
            again = await call(session, "observe", session_id=sid, diff=True)
            assert again["observation"]["aria_snapshot"].startswith("(no change")
            cut = await call(session, "observe", session_id=sid, scope="main", max_chars=120)
            cut_seen = cut["observation"]
            assert cut_seen["aria_truncated"] is True and len(cut_seen["aria_snapshot"]) <= 120
            assert cut_seen["aria_snapshot"].startswith("- main") and cut_seen["aria_chars"] > 120
            nowhere = await call(session, "observe", session_id=sid, scope="#nowhere")
            assert "#nowhere" in nowhere["observation"]["aria_error"]
            # A link that opens a new tab leaves a trace in the observation.
            link = re.search(r'link "about us" \[ref=(\w+)\]', tree)
            assert link, tree
            clicked = await call(
                session,
                "run_step",
                session_id=sid,
                step={"action": "click", "selector": f"aria-ref={link[1]}"},
            )
            assert clicked["ok"], clicked
            tabs = clicked["observation"].get("tabs") or []
            for _ in range(50):  # the new tab opens and loads on its own time
                if any(t["url"] == f"{site}/about.html" for t in tabs):
                    break
                await anyio.sleep(0.2)
                tabs = (await call(session, "observe", session_id=sid))["observation"].get(
                    "tabs"
                ) or []
            assert len(tabs) == 2, tabs
            assert any(t["url"] == f"{site}/about.html" for t in tabs), tabs
            # The steps still act on the session's own tab.
            assert [t["url"] for t in tabs if t.get("current")] == [f"{site}/help.html"], tabs
            saved = await call(session, "save_as_workflow", session_id=sid, name="agent-help")
            await call(session, "close_session", session_id=sid)
            job = await call(session, "submit_job", workflow="agent-help")
            done = await call(session, "get_job", job_id=job["job_id"], wait_s=120)
            return saved, done

    saved, done = anyio.run(agent)
    # The refs were kept as the lasting selectors they named: the job, with no snapshot of
    # its own, finds the iframe's field and button again.
    assert done["status"] == "succeeded", done
    assert done["result"] == {"answer": "Thanks, we will answer: Where is it?"}
    assert saved["steps"] == 5


def continue_when_asked(stack: LocalStack, sid: str) -> None:
    """The person: once the session waits for them (listed so, its slot kept), continue it."""
    with stack.client() as owner:
        wait_until(
            lambda: owner.get_session(sid).status == "waiting_for_human",
            120,
            what=f"session {sid} waiting for a person",
        )
        listed = {s.session_id: s.status for s in owner.open_sessions()}
        assert listed.get(sid) == "waiting_for_human", listed
        owner.continue_job(sid, note="signed")


def test_an_agent_uploads_answers_a_dialog_switches_tab_goes_back_and_gets_its_files(
    stack: LocalStack,
) -> None:
    """Issue 34's missing tools in one session: list_sessions, upload_file, a dialog step
    and what the dialog said, a new tab and switch_tab, back, await_human (continued by a
    person, and timed out), and get_file for the files its steps made (a download's text, a
    screenshot as an image the model sees)."""
    site = stack.site_url

    async def agent() -> None:
        async with connected(server(stack)) as session:
            sid = (await call(session, "open_session", idle_timeout_s=120))["session_id"]
            listed = await call(session, "list_sessions")
            assert sid in [s["session_id"] for s in listed["sessions"]], listed
            got = await call(
                session,
                "run_step",
                session_id=sid,
                steps=[
                    {"action": "goto", "url": f"{site}/table/1.html"},
                    {"action": "download", "selector": "#download-csv", "name": "prices.csv"},
                    {"action": "goto", "url": f"{site}/help.html"},
                    {"action": "click", "selector": "text=about us"},
                    # The new tab opens on its own time: switch_tab waits for it.
                    {"action": "switch_tab", "url_contains": "about.html"},
                ],
            )
            assert got["ok"], got
            assert set(got["files"]) == {"prices.csv"}, got
            seen = got["observation"]
            assert seen["url"] == f"{site}/about.html", seen
            current = [t["url"] for t in seen["tabs"] if t.get("current")]
            assert current == [f"{site}/about.html"], seen["tabs"]
            back = await call(
                session,
                "run_step",
                session_id=sid,
                steps=[
                    {"action": "switch_tab", "index": 0},
                    {"action": "goto", "url": f"{site}/board.html"},
                    {"action": "back"},
                ],
            )
            assert back["observation"]["url"] == f"{site}/help.html", back
            went = await call(
                session,
                "run_step",
                session_id=sid,
                step={"action": "goto", "url": f"{site}/board.html"},
            )
            assert went["ok"], went
            uploaded = await call(
                session,
                "upload_file",
                session_id=sid,
                selector="#attachments",
                name="notes.txt",
                content=base64.b64encode(b"hello, board").decode(),
                encoding="base64",
            )
            assert uploaded["ok"], uploaded
            assert "notes.txt (12 bytes)" in uploaded["observation"]["aria_snapshot"]
            answered = await call(
                session,
                "run_step",
                session_id=sid,
                steps=[
                    {"action": "dialog", "accept": True},
                    {"action": "click", "selector": "#delete-old"},
                    {"action": "click", "selector": "#rename"},  # no dialog step: dismissed
                    {"action": "screenshot", "name": "board"},
                ],
            )
            assert answered["ok"], answered
            assert answered["observation"]["dialogs"] == [
                {"type": "confirm", "message": 'Delete task "Old draft"?', "answer": "accepted"},
                {
                    "type": "prompt",
                    "message": 'New name for "Write report"?',
                    "answer": "dismissed",
                },
            ]
            assert "deleted Old draft" in answered["observation"]["aria_snapshot"]
            # A person is asked and continues the session; the agent's call returns then.
            async with anyio.create_task_group() as people:
                people.start_soon(anyio.to_thread.run_sync, continue_when_asked, stack, sid)
                asked = await call(
                    session, "await_human", session_id=sid, prompt="Sign the form", timeout_s=300
                )
            assert asked["ok"] and asked["result"] == {"human_note": "signed"}, asked
            unanswered = await refused(
                session, "await_human", session_id=sid, prompt="Anyone?", timeout_s=1
            )
            assert unanswered["error"]["kind"] == "human_timeout", unanswered
            listing = await call(session, "get_file", session_id=sid)
            assert [f["name"] for f in listing["files"]] == ["prices.csv", "board.png"]
            csv = await call(session, "get_file", session_id=sid, name="prices.csv")
            assert csv["content"].startswith("sku,name,price_eur"), csv
            assert csv["content_type"] == "text/csv" and csv["url"].startswith("http")
            shot = await session.call_tool("get_file", {"session_id": sid, "name": "board.png"})
            images = [c for c in shot.content if isinstance(c, types.ImageContent)]
            assert len(images) == 1 and images[0].mime_type == "image/png", shot.content
            assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
            saved = await call(session, "save_as_workflow", session_id=sid, name="agent-board")
            assert saved["steps"] == 15, saved  # the timed-out await_human is not kept
            await call(session, "close_session", session_id=sid)

    anyio.run(agent)
