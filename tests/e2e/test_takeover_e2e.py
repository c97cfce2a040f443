"""Human takeover on the local stack, in real Chromium: a person (a test driving the console)
takes a browser session's page over from the live view, clicks the code field on the frame
and types into it (input events on a frame smaller than the viewport, so the worker's
scaling is what lands the click), the agent's next step waits (its command stays pending
and says who holds the page), the person hands the page back, and the step then runs and
reads what the person typed. Both moves are run events. One session: seconds on the shared
stack."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from devstack.chaos import wait_until
from devstack.console_browser import console_browser, sign_in
from devstack.stack import LocalStack
from pagefleet.browsing.models import CommandView, StepsAnswer
from pagefleet.client import PagefleetClient

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# examples/site/code.html: the field at (40, 120), 400 x 40 CSS pixels, in a 1280 x 800
# viewport (a session's default): its centre is (240, 140).
VIEWPORT = (1280, 800)
FIELD_CENTRE = (240, 140)
TYPED = "417 902"


def test_a_person_takes_over_in_the_console_types_and_hands_back(
    stack: LocalStack, client: PagefleetClient
) -> None:
    """Chromium drives the console: Watch live, Take over, a click on the frame where the
    field is and typing on the keyboard, Hand back; the agent's step waits meanwhile, then
    reads the typed code."""
    assert stack.dev_api_key is not None
    sid = client.open_session(idle_timeout_s=120).session_id
    try:
        went = client.session_steps(sid, {"action": "goto", "url": f"{stack.site_url}/code.html"})
        assert went.ok, went.error
        with console_browser() as browser:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(60_000)
            sign_in(page, stack.console_url, stack.dev_api_key)
            page.goto(f"{stack.console_url}#/jobs/{sid}")
            page.get_by_role("button", name="Watch live").click()
            frame = page.locator("#live-frame")
            expect(frame).to_have_attribute("data-seq", re.compile(r"\d+"))
            page.get_by_role("button", name="Take over").click()
            expect(page.locator("#takeover-state")).to_contain_text("You hold the page")
            assert client.get_session(sid).takeover is not None
            # The field's centre on the frame as the console shows it (smaller than the page).
            shown = frame.evaluate("i => [i.clientWidth, i.clientHeight]")
            x, y = (FIELD_CENTRE[k] * shown[k] / VIEWPORT[k] for k in (0, 1))
            frame.click(position={"x": x, "y": y})
            page.keyboard.type(TYPED)
            read = {"action": "extract", "name": "code", "selector": "#code", "kind": "value"}
            sent = client.send_steps(sid, read, wait_s=0, aria=False)
            assert isinstance(sent, CommandView) and sent.state == "pending", sent
            held = client.get_command(sid, sent.command_id)  # waits, and says for whom
            assert held.state == "pending" and held.takeover is not None
            page.get_by_role("button", name="Hand back").click()
            expect(page.locator("#takeover-state")).to_contain_text("Handed back")

        def answered() -> StepsAnswer | None:
            view = client.get_command(sid, sent.command_id)
            return view.answer if view.state == "done" else None

        answer = wait_until(answered, 60, what="the agent's step answered after the hand-back")
        assert answer.ok and answer.result == {"code": TYPED}, answer  # where they clicked
        moves = [(e.state, e.holder) for e in client.events(sid).events if e.type == "takeover"]
        holder = held.takeover.holder
        assert moves == [("taken", holder), ("handed_back", holder)]
    finally:
        client.close_session(sid)
