"""Chromium driving the web console, for the browser tests and the README's pictures: the
binary the worker would use, a page of the console's size, and signing in as a user does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

from browser_task.browser.chromium import SYSTEM_CHROMIUM, SYSTEM_CHROMIUM_BINARY

VIEWPORT = {"width": 1280, "height": 860}


def chromium_launch_options() -> dict[str, object]:
    """The binary the worker would use, and its sandbox as the worker decides it (Chromium's
    sandbox cannot start as root)."""
    binary = SYSTEM_CHROMIUM_BINARY if Path(SYSTEM_CHROMIUM_BINARY).exists() else SYSTEM_CHROMIUM
    return {"executable_path": binary, "chromium_sandbox": os.geteuid() != 0}


@contextmanager
def console_browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**chromium_launch_options())  # type: ignore[arg-type]
        try:
            yield browser
        finally:
            browser.close()


def sign_in(page: Page, console_url: str, api_key: str, *, timeout_ms: float = 60_000) -> None:
    """Open the console, type the key into "API key", press "Sign in", wait for the jobs."""
    page.goto(console_url)
    page.get_by_label("API key").fill(api_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible(timeout=timeout_ms)
