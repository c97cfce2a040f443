"""screenshot, pdf and download: each becomes an artifact of the attempt."""

from __future__ import annotations

import asyncio
import mimetypes
import os
import re

from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from browser_task.tenant.artifacts import human_size
from pagefleet.workflow import Download, Pdf, Screenshot

PNG = "image/png"
PDF = "application/pdf"
MAX_NAME = 100


def pdf_name(name: str) -> str:
    return name if name.lower().endswith(".pdf") else f"{name}.pdf"


def safe_file_name(suggested: str, fallback: str = "download") -> str:
    """A site-suggested file name made safe for an artifact key (same rule as ARTIFACT_NAME)."""
    base = suggested.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", base).lstrip("._-")
    if not cleaned:
        return fallback
    if len(cleaned) > MAX_NAME:
        stem, dot, ext = cleaned.rpartition(".")
        ext = ext[:10] if dot else ""
        cleaned = (stem or cleaned)[: MAX_NAME - len(ext) - 1] + (f".{ext}" if ext else "")
    return cleaned


async def screenshot(step: Screenshot, ctx: RunContext) -> None:
    timeout = ctx.timeout_ms(step)
    tracked = step.artifact_name == ctx.plan.request.tracked_screenshot
    # The tracked screenshot hides what changes on every visit (monitor.mask): Playwright
    # paints a box over each match, the same in every run.
    monitor = ctx.plan.request.monitor
    mask = [ctx.page.locator(s) for s in monitor.mask] if tracked and monitor else None
    if step.selector is not None:
        element = ctx.scope(step.frame).locator(step.selector).first
        data = await element.screenshot(type="png", timeout=timeout, mask=mask)
    else:
        data = await ctx.page.screenshot(
            type="png", full_page=step.full_page, timeout=timeout, mask=mask
        )
    ctx.artifacts.add(step.artifact_name, data, PNG, retention=step.retention)
    if tracked:
        ctx.tracked_screenshot = data


async def pdf(step: Pdf, ctx: RunContext) -> None:
    timeout = ctx.timeout_ms(step)
    # page.pdf has no timeout of its own; a huge page could print for a long time.
    try:
        data = await asyncio.wait_for(
            ctx.page.pdf(
                format=step.format,
                landscape=step.landscape,
                print_background=step.print_background,
            ),
            timeout / 1000,
        )
    except TimeoutError:
        raise FailJob(
            f"pdf timed out after {timeout} ms printing the page", timeout="action"
        ) from None
    ctx.artifacts.add(pdf_name(step.name), data, PDF, retention=step.retention)


async def download(step: Download, ctx: RunContext) -> None:
    timeout = ctx.timeout_ms(step)
    page = ctx.page
    async with page.expect_download(timeout=timeout) as info:
        await ctx.scope(step.frame).locator(step.selector).first.click(timeout=timeout)
    file = await info.value
    try:
        problem = await file.failure()
        if problem is not None:
            raise FailJob(
                f"the download started by {step.selector!r} failed: {problem}",
                kind="download_failed",
            )
        path = await file.path()
        size = os.path.getsize(path)
        limit = ctx.artifacts.max_bytes
        name = step.name or safe_file_name(file.suggested_filename)
        if size > limit:  # check before reading it into memory
            raise FailJob(
                f"download {name} is {human_size(size)}, over the {human_size(limit)} "
                "limit per artifact",
                kind="artifact_too_large",
            )
        data = await asyncio.to_thread(path.read_bytes)
    finally:
        await file.delete()
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    ctx.artifacts.add(name, data, content_type, retention=step.retention)
