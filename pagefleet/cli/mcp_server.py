"""``pagefleet mcp``: the agent tools' MCP server (``pagefleet.agents``) over stdio.

It is a client of a pagefleet API like any other (its URL and key, the tenant's limits and
isolation): an agent opens a browser session, runs steps of the workflow language one at a
time reading an observation of the page after each, saves what worked as a named workflow,
and runs it as a job without the model.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from mcp.server.stdio import stdio_server

from pagefleet.agents.server import build_server
from pagefleet.agents.tools import AgentTools
from pagefleet.client import PagefleetClient


async def serve_stdio(client: PagefleetClient) -> None:
    """Serve until the client disconnects (stdin closes) or terminates the server (SIGTERM,
    what an MCP client sends when the server is not gone within its grace period), then
    close the browser sessions this server opened and the agent left open: they would
    otherwise hold a running slot and bill until their idle timeout."""
    agent = AgentTools(client)
    server = build_server(client, agent=agent)
    closing = anyio.Lock()

    async def close_opened() -> None:
        # Once at a time: the disconnect and a SIGTERM may both ask (the second finds none).
        with anyio.CancelScope(shield=True):
            async with closing:
                await anyio.to_thread.run_sync(agent.close_opened)

    with anyio.open_signal_receiver(signal.SIGTERM) as terminated:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_close_then_die, terminated, close_opened)
            try:
                async with stdio_server() as (read_stream, write_stream):
                    options = server.create_initialization_options()
                    await server.run(read_stream, write_stream, options)
            finally:
                await close_opened()
            tg.cancel_scope.cancel()


async def _close_then_die(
    terminated: AsyncIterator[int], close_opened: Callable[[], Awaitable[None]]
) -> None:
    """On SIGTERM: close what was opened, then die of the signal as if it were not caught
    (not by cancelling the serving, which waits for a stdin read that may never end)."""
    async for signum in terminated:
        await close_opened()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
