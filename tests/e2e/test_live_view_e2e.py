"""The live view on the local stack in real Chromium: a watched running job's page comes to
its owner's connection as JPEG frames (each message under API Gateway's 32 KB WebSocket
frame), another tenant's connection is refused and gets nothing, and a person in the
console (Chromium driving it) clicks "Watch live" on the job's page and sees the frames."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from websockets.sync.client import ClientConnection, connect

from devstack.chaos import wait_until
from devstack.console_browser import console_browser, sign_in
from devstack.stack import LocalStack
from pagefleet.client import PagefleetClient
from pagefleet.live.frames import PART_MAX_BYTES

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SHOWN_MS = 60_000
# Long enough to be watched; cancelled as soon as a test has seen what it needs.
SLOW_STEPS = [
    {"action": "goto", "url": "{{inputs.site}}"},
    *({"action": "sleep", "ms": 1000} for _ in range(90)),
]


def _socket(stack: LocalStack, key: str) -> ClientConnection:
    """A connection opened as the console opens it: with a single-use ticket of ``key``."""
    with stack.client(key) as api:
        ticket = api.live_ticket()
    return connect(ticket.url or f"{stack.live.url}?ticket={ticket.ticket}", open_timeout=30)


def _ask(ws: ClientConnection, **message: Any) -> dict[str, Any]:
    """Send an action and return its answer (frames arriving meanwhile are skipped)."""
    ws.send(json.dumps(message))
    while True:
        answer = json.loads(ws.recv(timeout=60))
        if answer.get("type") != "frame":
            return dict(answer)


def _frame(ws: ClientConnection, raw_sizes: list[int]) -> dict[str, Any]:
    """The next whole frame: its parts joined."""
    parts: dict[int, dict[int, str]] = {}
    while True:
        raw = ws.recv(timeout=60)
        raw_sizes.append(len(raw))
        message = json.loads(raw)
        if message.get("type") != "frame":
            continue
        got = parts.setdefault(message["seq"], {})
        got[message["part"]] = message["data"]
        if len(got) == message["parts"]:
            return {**message, "jpeg": base64.b64decode("".join(got[i] for i in sorted(got)))}


@pytest.fixture
def running_job(stack: LocalStack, client: PagefleetClient) -> Iterator[str]:
    job = client.submit({"steps": SLOW_STEPS, "inputs": {"site": stack.site_url}})
    wait_until(lambda: client.get(job.job_id).status == "running", 120, what="job running")
    yield job.job_id
    client.cancel(job.job_id)


def test_the_owner_sees_frames_and_another_tenants_connection_gets_nothing(
    stack: LocalStack, running_job: str
) -> None:
    assert stack.dev_api_key is not None
    other_key = stack.create_tenant_key("live-view-other")
    with _socket(stack, stack.dev_api_key) as mine, _socket(stack, other_key) as theirs:
        refused = _ask(theirs, action="watch", job_id=running_job)
        assert (refused["type"], refused["code"]) == ("error", "not_found")
        watching = _ask(mine, action="watch", job_id=running_job)
        assert watching["type"] == "watching" and watching["status"] == "running"
        sizes: list[int] = []
        first = _frame(mine, sizes)
        assert first["jpeg"][:2] == b"\xff\xd8" and first["jpeg"][-2:] == b"\xff\xd9"
        assert first["width"] > 0 and first["height"] > 0 and first["job_id"] == running_job
        assert all(size <= PART_MAX_BYTES for size in sizes)  # one WebSocket frame each
        # The frames went out to the job's watchers; the refused connection got none.
        with pytest.raises(TimeoutError):
            theirs.recv(timeout=0.5)  # nothing is waiting for it
        assert _ask(mine, action="unwatch", job_id=running_job)["type"] == "unwatched"


def test_a_person_watches_a_running_job_in_the_console(stack: LocalStack, running_job: str) -> None:
    assert stack.dev_api_key is not None
    with console_browser() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page: Page = context.new_page()
        page.set_default_timeout(SHOWN_MS)
        sign_in(page, stack.console_url, stack.dev_api_key)
        page.goto(f"{stack.console_url}#/jobs/{running_job}")
        page.get_by_role("button", name="Watch live").click()
        frame = page.locator("#live-frame")
        expect(frame).to_have_attribute("data-seq", "1", timeout=SHOWN_MS)
        expect(frame).to_be_visible()
        assert frame.evaluate("img => img.naturalWidth") > 0  # a JPEG the browser decoded
        page.get_by_role("button", name="Stop watching").click()
        expect(page.locator("#live-state")).to_have_text("Not watching.")
        context.close()
