"""route: the job's own answer to matching requests (browser_task.run.routing)."""

from __future__ import annotations

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from pagefleet.workflow import Route


async def route(step: Route, ctx: RunContext) -> None:
    if ctx.router is None:
        raise FailJob("route steps are not supported here", kind="invalid_workflow")
    await ctx.router.add(ctx.session.context, step)
