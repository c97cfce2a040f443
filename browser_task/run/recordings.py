"""What an attempt recorded of itself (its video, its HAR), kept or dropped once its
context has closed (both are written by Playwright as the context closes)."""

from __future__ import annotations

from browser_task.browser.generation import JobBrowser
from browser_task.browser.har import drop_har, keep_har
from browser_task.browser.video import drop_video, keep_video
from browser_task.run.context import RunContext
from browser_task.tenant.artifacts import ArtifactCollector


async def keep_recordings(ctx: RunContext, artifacts: ArtifactCollector, *, failed: bool) -> None:
    """After ``ctx.session`` closed: its video and its HAR (redacted with the run's masker)."""
    try:
        await keep_video(ctx.session, artifacts, failed=failed)
    finally:
        await keep_har(
            ctx.session,
            artifacts,
            failed=failed,
            requested=ctx.plan.options.har,
            masker=ctx.masker,
        )


def drop_recordings(session: JobBrowser) -> None:
    """A run abandoned: nothing it recorded is kept."""
    drop_video(session)
    drop_har(session)
