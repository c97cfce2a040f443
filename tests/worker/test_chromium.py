"""How the worker launches Chromium: our feature switches win without dropping Playwright's,
and a real job on a loopback page makes no request to any other host."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from urllib.parse import urlsplit

import psutil
from playwright.async_api import async_playwright

from browser_task.browser.chromium import (
    DISABLED_FEATURES,
    ENABLED_FEATURES,
    chromium_args,
    chromium_executable,
    driver_env,
    environment,
    sandbox_enabled,
)
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.settings import WorkerSettings
from tests.worker.conftest import submit, wait_for_job


def _switch_values(cmdline: list[str], name: str) -> list[set[str]]:
    prefix = f"--{name}="
    return [set(arg[len(prefix) :].split(",")) for arg in cmdline if arg.startswith(prefix)]


def test_feature_switches_keep_playwrights_and_come_last(settings: WorkerSettings) -> None:
    """Chromium keeps only the last --disable-features / --enable-features; ours must come
    last and still carry every feature Playwright switches (a Playwright upgrade that adds
    one fails here until chromium.py lists it too)."""

    async def launched_cmdline() -> list[str]:
        marker = f"--pagefleet-test-{os.getpid()}"
        with environment(driver_env()):
            pw = await async_playwright().start()
        try:
            browser = await pw.chromium.launch(
                executable_path=chromium_executable(settings, pw),
                args=[*chromium_args(settings), marker],
                chromium_sandbox=sandbox_enabled(settings),
            )
            try:
                for proc in psutil.Process(os.getpid()).children(recursive=True):
                    cmdline = proc.cmdline()
                    if marker in cmdline and not any(a.startswith("--type=") for a in cmdline):
                        return cmdline
                raise AssertionError("browser process not found")
            finally:
                await browser.close()
        finally:
            await pw.stop()

    cmdline = asyncio.run(launched_cmdline())
    for name, ours in (
        ("disable-features", DISABLED_FEATURES),
        ("enable-features", ENABLED_FEATURES),
    ):
        values = _switch_values(cmdline, name)
        assert values[-1] == set(ours), f"our --{name} is not the one Chromium keeps"
        playwrights = set().union(*values[:-1])
        assert playwrights <= values[-1], f"--{name} drops {sorted(playwrights - values[-1])}"


def test_a_new_page_builds_no_browser_ui_in_a_renderer_of_its_own(
    settings: WorkerSettings,
) -> None:
    """Chromium 156 builds the omnibox's popup (a WebUI page, ~400 modules) in a renderer of
    its own for every new page, ~320 ms of CPU a job for a popup headless never shows:
    the worker's switches keep each context to the one renderer of its page."""

    async def renderers_of_a_new_page() -> list[list[str]]:
        with environment(driver_env()):
            pw = await async_playwright().start()
        # Only this launch's processes: another test's browser may still run in this process.
        before = {proc.pid for proc in psutil.Process(os.getpid()).children(recursive=True)}
        try:
            browser = await pw.chromium.launch(
                executable_path=chromium_executable(settings, pw),
                args=chromium_args(settings),
                chromium_sandbox=sandbox_enabled(settings),
            )
            try:
                context = await browser.new_context()
                await context.new_page()
                # The popup's renderer starts with the page; look for it for a while.
                seen: list[list[str]] = []
                for _ in range(20):
                    await asyncio.sleep(0.1)
                    seen = [
                        cmdline
                        for proc in psutil.Process(os.getpid()).children(recursive=True)
                        if proc.pid not in before
                        and "--type=renderer" in (cmdline := _cmdline(proc))
                    ]
                    if any("--top-chrome-webui" in c for c in seen):
                        break
                return seen
            finally:
                await browser.close()
        finally:
            await pw.stop()

    renderers = asyncio.run(renderers_of_a_new_page())
    assert [c for c in renderers if "--top-chrome-webui" in c] == []
    assert len(renderers) == 1, "a new context's page runs in one renderer"


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


async def _no_dns(host: str) -> list[str]:
    raise OSError(-2, "no DNS in this test")


def test_a_job_on_a_loopback_page_reaches_no_other_host(run_worker, services, site) -> None:
    """Every request the browser makes goes through the worker's egress proxy, which records
    each one; Chromium's own background traffic (sign-in, updates, field trials, safe
    browsing, ...) would show up there as other hosts."""
    page = site.add("/", "<title>t</title><h1 id=h>hello</h1>")
    running = run_worker(resolver=_no_dns)
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": page},
                {"action": "extract", "name": "h", "selector": "#h"},
                {"action": "screenshot", "name": "page.png"},
            ]
        },
    )
    assert wait_for_job(services, job.job_id).status is JobStatus.SUCCEEDED
    # Chromium starts its background services within seconds of launch and of a context.
    time.sleep(5)
    hosts = Counter(f"{d.host}:{d.port}" for d in running.worker.browsers.egress.decisions)
    assert set(hosts) == {urlsplit(page).netloc}, hosts
