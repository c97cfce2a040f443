"""``pagefleet mcp``: the agent tools' MCP server (``pagefleet.agents``) over stdio.

It is a client of a pagefleet API like any other (its URL and key, the tenant's limits and
isolation): an agent opens a browser session, runs steps of the workflow language one at a
time reading an observation of the page after each, saves what worked as a named workflow,
and runs it as a job without the model.
"""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from pagefleet.agents.server import build_server
from pagefleet.agents.tools import AgentTools
from pagefleet.client import PagefleetClient


async def serve_stdio(client: PagefleetClient) -> None:
    """Serve until the client disconnects (stdin closes), then close the browser sessions
    this server opened and the agent left open: they would otherwise hold a running slot
    and bill until their idle timeout."""
    agent = AgentTools(client)
    server = build_server(client, agent=agent)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(agent.close_opened)
