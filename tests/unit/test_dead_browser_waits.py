"""A wait on a browser ends when the browser is gone (browser_task.browser.generation.within)
and a browser process's exit is told as it happens (process_tree.watch_exit)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any, cast

import psutil
import pytest

from browser_task.browser.generation import BrowserGeneration, RelaunchBrowser
from browser_task.browser.process_tree import watch_exit


def generation() -> BrowserGeneration:
    return BrowserGeneration(browser=cast(Any, object()), number=7)


def test_a_call_answered_in_time_gives_its_answer() -> None:
    async def main() -> str:
        async def answer() -> str:
            return "page"

        return await generation().within(answer(), 5)

    assert asyncio.run(main()) == "page"


def test_a_call_on_a_live_browser_runs_out_its_bound() -> None:
    async def main() -> None:
        await generation().within(asyncio.Event().wait(), 0.01)

    with pytest.raises(TimeoutError):
        asyncio.run(main())


def test_a_call_waiting_when_the_browser_dies_is_given_up_at_once() -> None:
    async def main() -> bool:
        browser = generation()
        never = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(browser.within(never, 3600))
        await asyncio.sleep(0)
        browser.gone.set()
        with pytest.raises(RelaunchBrowser):
            await waiting
        await asyncio.sleep(0)
        return never.cancelled()

    assert asyncio.run(main())  # and the call given up on is cancelled, not left running


def test_a_call_on_a_browser_known_dead_is_not_started() -> None:
    started: list[str] = []

    async def close() -> None:
        started.append("close")

    async def main() -> None:
        browser = generation()
        browser.gone.set()
        with pytest.raises(RelaunchBrowser):
            await browser.within(close(), 10)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert started == []


def test_a_process_exit_is_told_without_polling() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:

        async def main() -> None:
            exited = asyncio.Event()
            unwatch = watch_exit(psutil.Process(child.pid), exited.set)
            assert not exited.is_set()
            child.kill()
            await asyncio.wait_for(exited.wait(), 30)
            unwatch()  # after the exit: nothing left to stop, and no error

        asyncio.run(main())
    finally:
        child.kill()
        child.wait()
