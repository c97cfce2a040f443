"""`pagefleet mcp`'s tools as an agent reads and calls them, driven by the MCP SDK's own client
over stdio: the tool list fits a model's budget and still types the step language, and every
wrong call is refused naming the argument and what to do next. The refusals here happen
before anything is sent, so the server is given an API address where nothing listens."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import jsonschema
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from devstack.stack import REPO_ROOT

T = TypeVar("T")
# The tool list an agent reads before its first call (it was ~149,000 characters).
TOOL_LIST_BUDGET = 15_000
SID = "0" * 26
# Nothing listens on the discard port: a call that got past the checks would fail to connect.
NOWHERE = "http://127.0.0.1:9"


def _agent(talk: Callable[[ClientSession], Awaitable[T]]) -> T:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pagefleet.cli", "mcp"],
        env={"PAGEFLEET_API_URL": NOWHERE, "PAGEFLEET_API_KEY": "pf_unused"},
        cwd=str(REPO_ROOT),
    )

    async def run() -> T:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await talk(session)

    return anyio.run(run)


def _refusal(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert body["next"], body  # every refusal says what to do next
    return dict(body)


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    async def talk(session: ClientSession) -> list[dict[str, Any]]:
        return [_refusal(await session.call_tool(name, args)) for name, args in calls]

    return _agent(talk)


def test_the_tool_list_fits_its_budget_and_still_types_the_step_language() -> None:
    async def talk(session: ClientSession) -> tuple[int, dict[str, types.Tool]]:
        listed = await session.list_tools()
        size = len(listed.model_dump_json(by_alias=True, exclude_none=True))
        return size, {t.name: t for t in listed.tools}

    size, tools = _agent(talk)
    print(f"\nMCP tools/list: {size} characters for {len(tools)} tools")
    assert size <= TOOL_LIST_BUDGET
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert len(tool.description or "") >= 80, tool.name  # something a model can act on
    # A client validating against the schema catches a wrong step before sending it.
    run_step = jsonschema.Draft202012Validator(tools["run_step"].input_schema)
    good = {"session_id": SID, "step": {"action": "goto", "url": "http://127.0.0.1/"}}
    assert run_step.is_valid(good)
    for wrong in (
        {"session_id": SID, "step": {"action": "teleport"}},
        {"session_id": SID, "step": {"action": "click", "selector": "#a", "timeout_ms": "x"}},
        # a check may only look: a click in one is refused
        {
            "session_id": SID,
            "step": {
                "action": "click",
                "selector": "#pay",
                "irreversible": True,
                "check": [{"action": "click", "selector": "#again"}],
            },
        },
        {**good, "colour": "blue"},
    ):
        assert not run_step.is_valid(wrong), wrong
    # Each action's own fields are one line of the step's description (a field the server
    # checks, naming it): a new step or field costs the list a line, not a schema branch.
    described = tools["run_step"].input_schema["$defs"]["step"]["description"]
    assert "goto: url* (http(s) URL" in described
    assert "click: selector*; button: left|right|middle; click_count: int 1..3" in described
    assert "paginate: steps*: [step]; next*" in described
    submit = jsonschema.Draft202012Validator(tools["submit_job"].input_schema)
    assert submit.is_valid({"workflow": "shop", "inputs": {"q": "tea"}})
    assert not submit.is_valid({"workflow": "shop", "colour": "blue"})


def test_a_missing_argument_is_named_not_answered_as_no_such_tool() -> None:
    closed, got = _calls(("close_session", {}), ("get_job", {"wait_s": 1}))
    assert (closed["field"], closed["error"]) == (
        "session_id",
        "session_id: required argument missing",
    )
    assert "no tool" not in json.dumps(closed)
    assert "close_session again" in closed["next"]
    assert got["field"] == "job_id"


def test_an_unknown_argument_is_refused_with_the_ones_the_tool_takes() -> None:
    (observed,) = _calls(("observe", {"session_id": SID, "zoom": 2}))
    assert observed["field"] == "zoom"
    assert "observe takes session_id" in observed["error"]


def test_step_and_steps_together_are_refused_instead_of_one_being_dropped() -> None:
    goto = {"action": "goto", "url": "http://127.0.0.1/"}
    both, neither = _calls(
        ("run_step", {"session_id": SID, "step": goto, "steps": [goto]}),
        ("run_step", {"session_id": SID}),
    )
    assert both["field"] == "steps" and "not both" in both["error"]
    assert neither["field"] == "steps"


def test_a_wrong_step_is_refused_naming_its_field_before_it_is_sent() -> None:
    paged = {"action": "paginate", "next": "a", "steps": [{"action": "click"}]}
    one, listed, nested, submitted = _calls(
        ("run_step", {"session_id": SID, "step": {"action": "goto"}}),
        ("run_step", {"session_id": SID, "steps": [{"action": "click"}]}),
        ("run_step", {"session_id": SID, "step": paged}),
        ("submit_job", {"steps": [{"action": "fill", "selector": "#q"}]}),
    )
    assert (one["status"], one["field"]) == (422, "step.goto.url")
    assert listed["field"] == "steps[0].click.selector"
    assert nested["field"] == "step.paginate.steps[0].click.selector"
    assert submitted["field"] == "steps[0].fill.value"
    assert "submit_job again" in submitted["next"]


def test_an_unknown_tool_lists_the_tools_there_are() -> None:
    (unknown,) = _calls(("teleport", {}))
    assert unknown["error"] == "no tool 'teleport'"
    assert "open_session" in unknown["next"] and "run_step" in unknown["next"]


def test_an_api_that_does_not_answer_is_an_error_saying_what_to_do() -> None:
    (unreachable,) = _calls(("observe", {"session_id": SID}))
    assert unreachable["code"] == "unreachable"
    assert "PAGEFLEET_API_URL" in unreachable["next"]
