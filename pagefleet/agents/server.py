"""The MCP server of the agent tools: the same tools over any transport (stdio, HTTP)."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from pagefleet.agents.catalogue import TOOLS
from pagefleet.agents.tools import AgentTools, ToolAnswer, ToolRefusal
from pagefleet.client import PagefleetClient

SERVER_NAME = "pagefleet"
INSTRUCTIONS = (
    "Drive a real browser one step at a time: open_session, then run_step with steps of the "
    "pagefleet workflow language (goto, click, fill, press, select, wait_for, extract, ...), "
    "reading the observation (URL, title, ARIA snapshot) after each. save_as_workflow keeps "
    "the steps that succeeded as a named workflow (name literal values in `inputs` to make "
    "them parameters); submit_job runs it later without you; close_session when done. "
    "Every refusal says what to do next in `next`."
)


def listed_tools() -> list[types.Tool]:
    return [
        types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
        for t in TOOLS
    ]


def tool_list_chars() -> int:
    """How many characters ``tools/list`` answers: what a model reads before its first call."""
    result = types.ListToolsResult(tools=listed_tools())
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


def _result(answer: ToolAnswer) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(text=json.dumps(answer.body, separators=(",", ":")))]
    if answer.screenshot is not None:
        data = base64.b64encode(answer.screenshot.data).decode("ascii")
        content.append(types.ImageContent(data=data, mime_type=answer.screenshot.mime_type))
    return types.CallToolResult(
        content=content, structured_content=answer.body, is_error=answer.failed
    )


def _refused(refusal: ToolRefusal) -> types.CallToolResult:
    body = refusal.body()
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body))], structured_content=body, is_error=True
    )


def build_server(
    client: PagefleetClient, *, wait_s: int | None = None, agent: AgentTools | None = None
) -> Server[Any]:
    """``wait_s``: the longest a tool waits for a job or a step (remote MCP: under the
    API's timeout); None: as long as the tool allows. ``agent``: the tools to serve (made
    here when not given: a caller that keeps it can close the sessions it opened when the
    connection ends)."""
    agent = agent or AgentTools(client, wait_s=wait_s)
    listed = listed_tools()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            answer = await anyio.to_thread.run_sync(agent.call, params.name, arguments)
        except ToolRefusal as refusal:
            return _refused(refusal)
        return _result(answer)

    return Server(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
