"""Human takeover on the local stack, in real Chromium: a person takes a browser session's
page over, clicks the code field and types into it through input events (sent on a frame
half the viewport's size, so the worker's scaling is what lands the click), the agent's next
step waits (its command stays pending and says who holds the page), the person hands the
page back, and the step then runs and reads what the person typed. Both moves are run
events. One session, a handful of calls: a few seconds on the shared stack."""

from __future__ import annotations

import pytest

from devstack.chaos import wait_until
from devstack.stack import LocalStack
from pagefleet.browsing.models import CommandView, StepsAnswer
from pagefleet.client import PagefleetClient

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# examples/site/code.html: the field at (40, 120), 400 x 40 CSS pixels, in a 1280 x 800
# viewport (a session's default); the frame the person saw it on is half that size.
FRAME = (640, 400)
FIELD_CENTRE_ON_FRAME = ((40 + 200) / 2, (120 + 20) / 2)
TYPED = "417 902"


def test_a_person_takes_over_types_and_hands_back_and_the_agents_step_sees_it(
    stack: LocalStack, client: PagefleetClient
) -> None:
    sid = client.open_session(idle_timeout_s=120).session_id
    try:
        went = client.session_steps(sid, {"action": "goto", "url": f"{stack.site_url}/code.html"})
        assert went.ok, went.error

        taken = client.take_over(sid).takeover
        assert client.get_session(sid).takeover == taken  # shown to the agent's side
        x, y = FIELD_CENTRE_ON_FRAME
        typed = client.send_input(
            sid,
            taken.takeover_id,
            [{"type": "click", "x": x, "y": y}, {"type": "text", "text": TYPED}],
            frame=FRAME,
        )
        assert typed.seq == 1

        # The agent's step waits for the person: pending, saying who holds the page.
        read = {"action": "extract", "name": "code", "selector": "#code", "kind": "value"}
        sent = client.send_steps(sid, read, wait_s=0, aria=False)
        assert isinstance(sent, CommandView) and sent.state == "pending", sent
        command_id = sent.command_id
        held = client.get_command(sid, command_id)
        assert held.state == "pending" and held.takeover is not None
        assert held.takeover.takeover_id == taken.takeover_id

        handed = client.hand_back(sid, taken.takeover_id)
        assert handed.handed_back

        def answered() -> StepsAnswer | None:
            view = client.get_command(sid, command_id)
            return view.answer if view.state == "done" else None

        answer = wait_until(answered, 60, what="the agent's step answered after the hand-back")
        assert answer.ok, answer.error
        assert answer.result == {"code": TYPED}  # what the person typed, where they clicked
        moves = [
            (e.state, e.holder) for e in client.events(sid).events if e.type.value == "takeover"
        ]
        assert moves == [("taken", taken.holder), ("handed_back", taken.holder)]
    finally:
        client.close_session(sid)
