"""The worker's side of a browser session without a browser: how it ends (idle, close, a
gone channel) and what it answers to duplicate deliveries, on a scripted channel and a
moved clock."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from browser_task.run.session_loop import SessionLoop
from devstack.fakes.session_commands import FakeCommandLedger
from pagefleet.browsing.channel import ChannelGone
from pagefleet.browsing.commands import CommandRecord
from pagefleet.browsing.models import Answer, Command
from pagefleet.jobs.session_terms import SessionTerms
from pagefleet.workflow.masking import Masker

CHANNEL = "0" * 26


class ScriptedChannel:
    """Hands out the scripted commands; each wait for one moves the clock by ``wait_s``."""

    def __init__(self, script: list[Command | None], clock: list[float]) -> None:
        self.script = script
        self.clock = clock
        self.answers: list[Answer] = []

    def next_command(self, channel: str, *, wait_s: int) -> Command | None:
        if not self.script:
            raise ChannelGone(channel)
        command = self.script.pop(0)
        if command is None:
            self.clock[0] += wait_s
        return command

    def send_answer(self, channel: str, answer: Answer) -> None:
        self.answers.append(answer)


def run(
    script: list[Command | None], idle_s: int = 30, ledger: FakeCommandLedger | None = None
) -> tuple[dict[str, Any], ScriptedChannel]:
    clock = [0.0]
    channel = ScriptedChannel(script, clock)
    ctx: Any = SimpleNamespace(
        result={}, tenant_id="t", plan=SimpleNamespace(job_id="s"), events=None, masker=Masker()
    )

    async def no_evaluate() -> bool:
        return False

    loop = SessionLoop(
        ctx,
        channel,  # type: ignore[arg-type]  # the loop takes and answers commands only
        SessionTerms(channel=CHANNEL, idle_timeout_s=idle_s),
        commands=ledger or FakeCommandLedger(),
        evaluate_allowed=no_evaluate,
        clock=lambda: clock[0],
    )
    return asyncio.run(loop.run()), channel


def test_duplicate_deliveries_do_not_keep_an_idle_session_open() -> None:
    # A command already answered, delivered again and again: answered from its record,
    # never run, and the session still closes when idle.
    ledger = FakeCommandLedger()
    record = ledger.record(
        CommandRecord(
            tenant_id="t",
            session_id="s",
            command_id="c",
            fingerprint="f",
            deadline=10**10,
            created_at="",
            expires_at=0,
        )
    )
    ledger.claim("t", "s", record.command_id, now=0, order="1")
    ledger.finish("t", "s", "c", Answer(id="x", ran=1), [{"action": "click", "selector": "a"}])
    copies = [Command(id=f"{n:026d}", command_id="c") for n in range(5)]
    script: list[Command | None] = []
    for copy in copies:
        script += [copy, None]  # a copy every 10 s (the poll's wait)
    result, channel = run(script, idle_s=30, ledger=ledger)
    assert result["closed_reason"] == "idle" and result["step_count"] == 0
    assert [(a.id, a.ran) for a in channel.answers][:3] == [(c.id, 1) for c in copies[:3]]
    assert len(channel.answers) < len(copies)  # closed before the last copies came


def test_a_close_command_is_answered_and_ends_the_session() -> None:
    result, channel = run([None, Command(id="1" * 26, op="close")])
    assert result == {"step_count": 0, "data": {}, "closed_reason": "closed"}
    assert [a.id for a in channel.answers] == ["1" * 26]


def test_a_deleted_channel_ends_the_session_as_closed() -> None:
    result, _ = run([None])
    assert result["closed_reason"] == "closed"
