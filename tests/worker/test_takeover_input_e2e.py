# ruff: noqa: E501  (page markup and scripts read better unwrapped)
"""A person's pointer on a taken-over page, played by the worker in real Chromium against a
page on 127.0.0.1: moving over a menu opens it (CSS ``:hover`` and ``mouseenter``), so an
item only reachable while it is open can be clicked; a double click arrives as a real one
(one ``dblclick``, the second click's ``detail`` 2), not as two single clicks. The batches
go through the worker's own path (the lock read, the ledger's batches in order, scaled from
a frame half the viewport's size)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from playwright.async_api import Page, async_playwright

from browser_task.observe.telemetry import JobLog
from browser_task.run.takeover import PageTakeover
from devstack.console_browser import chromium_launch_options
from devstack.fakes import FakeClock, fake_services
from devstack.fakes.takeover_inputs import FakeTakeoverInputs
from tests.unit.test_takeover_worker import _batch, _running, _take
from tests.worker.site_pages import html, serve

pytestmark = [pytest.mark.e2e]

VIEWPORT = {"width": 1280, "height": 800}
SCALE = 2  # the frame the person saw is 640 x 400: half the viewport

PAGE = html(
    """<body style="margin:0;font:16px sans-serif">
  <style>
    #menu { position:absolute; left:40px; top:40px; width:200px; }
    #menu > span { display:block; height:40px; background:#ddd; }
    #menu ul { display:none; margin:0; padding:0; list-style:none; background:#eee; }
    #menu:hover ul { display:block; }
    #menu li { height:40px; }
    #twice { position:absolute; left:400px; top:300px; width:200px; height:100px; background:#cde; }
  </style>
  <nav id="menu"><span>Account</span><ul><li id="sign-out">Sign out</li></ul></nav>
  <div id="twice">double-click me</div>
  <pre id="seen"></pre>
  <script>
    const seen = [];
    const say = (what) => { seen.push(what); document.getElementById('seen').textContent = seen.join(' '); };
    document.getElementById('menu').addEventListener('mouseenter', () => say('menu-open'));
    document.getElementById('sign-out').addEventListener('click', () => say('sign-out'));
    const twice = document.getElementById('twice');
    twice.addEventListener('click', (e) => say('click' + e.detail));
    twice.addEventListener('dblclick', () => say('dblclick'));
  </script>
</body>""",
    title="menus",
)


async def _centre(page: Page, selector: str) -> dict[str, float]:
    """The element's centre in the frame's pixels (what the console would send)."""
    box = await page.locator(selector).bounding_box()
    assert box is not None
    return {
        "x": (box["x"] + box["width"] / 2) / SCALE,
        "y": (box["y"] + box["height"] / 2) / SCALE,
    }


def test_hover_opens_a_menu_and_a_double_click_is_one_dblclick() -> None:
    clock = FakeClock()
    svc = fake_services(clock)
    job = _running(svc, clock)
    inputs = FakeTakeoverInputs()
    lock = _take(svc, job, clock)
    sent = 0

    async def send(worker: PageTakeover, events: list[dict[str, Any]]) -> None:
        """One batch as the API takes it: numbered on the lock, recorded, then looked at."""
        nonlocal sent
        sent += 1
        svc.store.touch_takeover(
            "t",
            job.job_id,
            lock.takeover_id,
            holder=lock.holder,
            until=lock.until,
            now=int(clock.now()),
            count_input=True,
        )
        inputs.put(_batch(job, lock, sent, events))
        await worker.look()

    async def scenario() -> None:
        with serve({"/menus.html": PAGE}) as site:
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(**chromium_launch_options())  # type: ignore[arg-type]
                try:
                    page = await (await browser.new_context(viewport=VIEWPORT)).new_page()  # type: ignore[arg-type]
                    await page.goto(site.url("/menus.html"))
                    worker = PageTakeover(
                        page, job, svc.store, lambda: inputs, events=None, audit=None, log=JobLog()
                    )
                    await worker.look()
                    assert not worker.free  # the person holds it
                    seen = page.locator("#seen")
                    item = page.locator("#sign-out")
                    assert not await item.is_visible()  # closed until hovered

                    await send(worker, [{"type": "move", **await _centre(page, "#menu > span")}])
                    await item.wait_for(state="visible", timeout=10_000)
                    assert await seen.text_content() == "menu-open"
                    # Down to the item, staying over the menu, and a click on it.
                    at = await _centre(page, "#sign-out")
                    await send(
                        worker,
                        [
                            {"type": "move", **at},
                            {"type": "down", **at},
                            {"type": "up", **at},
                        ],
                    )
                    assert await seen.text_content() == "menu-open sign-out"

                    # A double click as the console sends it: two presses, counts 1 and 2.
                    at = await _centre(page, "#twice")
                    await send(
                        worker,
                        [
                            {"type": "move", **at},
                            {"type": "down", **at, "count": 1},
                            {"type": "up", **at, "count": 1},
                        ],
                    )
                    await send(  # the second click comes in the next batch, as it may
                        worker,
                        [{"type": "down", **at, "count": 2}, {"type": "up", **at, "count": 2}],
                    )
                    assert (await seen.text_content() or "").split() == [
                        "menu-open",
                        "sign-out",
                        "click1",
                        "click2",
                        "dblclick",
                    ]
                    assert worker.dispatched == 9
                    await worker.close()
                finally:
                    await browser.close()

    asyncio.run(scenario())
