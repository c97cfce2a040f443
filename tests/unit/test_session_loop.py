"""The worker's side of a browser session without a browser: how it ends (idle, close), what
it does with duplicate and lost wake-ups, and what it leaves when it ends, on a scripted
mailbox and a moved clock."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from browser_task.run.session_loop import RECORD_WAITS_S, SessionLoop
from devstack.fakes.session_commands import FakeCommandLedger
from pagefleet.browsing.commands import Claim, CommandBody, CommandRecord, CommandState
from pagefleet.browsing.inbox import Wakeup
from pagefleet.browsing.models import Answer, Command
from pagefleet.jobs.session_terms import SessionTerms
from pagefleet.workflow.masking import Masker

CLICK = {"action": "click", "selector": "a"}


class ScriptedMailbox:
    """Hands out the scripted wake-ups; a None is a wait for nothing, moving the clock."""

    def __init__(self, script: list[Wakeup | None], clock: list[float]) -> None:
        self.script = script
        self.clock = clock

    async def get(self, timeout_s: float) -> Wakeup | None:
        wakeup = self.script.pop(0) if self.script else None
        if wakeup is None:
            self.clock[0] += timeout_s
        return wakeup


class Loop(SessionLoop):
    """The session loop with each command's steps answered instead of run in a browser."""

    ran: list[str]

    async def _steps(self, command: Command) -> Answer:
        self.ran.append(command.command_id)
        self.recorded.extend(command.steps)
        return Answer(id=command.id, ran=len(command.steps))


def wake(command_id: str | None = None, op: str = "command") -> Wakeup:
    return Wakeup.model_validate(
        {"id": "w", "op": op, "tenant_id": "t", "session_id": "s", "command_id": command_id}
    )


def record(ledger: FakeCommandLedger, command_id: str, *, created: str = "1") -> CommandRecord:
    return ledger.record(
        CommandRecord(
            tenant_id="t",
            session_id="s",
            command_id=command_id,
            fingerprint="f",
            deadline=10**10,
            created_at=created,
            expires_at=0,
            body=CommandBody(steps=[CLICK]),
        )
    )


def loop_over(
    script: list[Wakeup | None], ledger: FakeCommandLedger, idle_s: int = 30, takeover: Any = None
) -> Loop:
    clock = [0.0]
    ctx: Any = SimpleNamespace(
        result={}, tenant_id="t", plan=SimpleNamespace(job_id="s"), events=None, masker=Masker()
    )

    async def no_evaluate() -> bool:
        return False

    loop = Loop(
        ctx,
        ScriptedMailbox(script, clock),  # type: ignore[arg-type]  # get() only
        SessionTerms(idle_timeout_s=idle_s),
        commands=ledger,
        evaluate_allowed=no_evaluate,
        clock=lambda: clock[0],
        wall_clock=lambda: 1.0,
        takeover=takeover,
    )
    loop.ran = []
    return loop


def test_duplicate_wakeups_run_a_command_once_and_do_not_keep_an_idle_session_open() -> None:
    ledger = FakeCommandLedger()
    record(ledger, "c")
    script: list[Wakeup | None] = []
    for _ in range(5):
        script += [wake("c"), None]  # a copy every 10 s (the wait's length)
    loop = loop_over(script, ledger, idle_s=30)
    result = asyncio.run(loop.run())
    # Run when the loop started (it was pending), never again for its wake-ups.
    assert loop.ran == ["c"]
    assert result["closed_reason"] == "idle" and result["step_count"] == 1
    assert len(loop.mailbox.script) > 0  # type: ignore[attr-defined]  # closed before the end


def test_a_close_wakeup_ends_the_session() -> None:
    loop = loop_over([None, wake(op="close")], FakeCommandLedger())
    result = asyncio.run(loop.run())
    assert result == {"step_count": 0, "data": {}, "closed_reason": "closed"}


def test_commands_sent_before_the_worker_held_the_session_run_first_in_order() -> None:
    ledger = FakeCommandLedger()
    record(ledger, "second", created="2")
    record(ledger, "first", created="1")
    loop = loop_over([wake(op="close")], ledger)
    asyncio.run(loop.run())
    assert loop.ran == ["first", "second"]


def test_a_lost_wakeup_delays_a_command_until_the_next_look_never_loses_it() -> None:
    ledger = FakeCommandLedger()
    loop = loop_over([None, None, wake(op="close")], ledger, idle_s=300)

    real_get = loop.mailbox.get

    async def get(timeout_s: float) -> Wakeup | None:
        if not ledger.session_commands("t", "s"):
            record(ledger, "late")  # recorded, its wake-up never arrived
        return await real_get(timeout_s)

    loop.mailbox.get = get  # type: ignore[method-assign]
    asyncio.run(loop.run())
    assert loop.ran == ["late"]


def test_what_is_pending_when_a_session_ends_is_expired_never_left_waiting() -> None:
    ledger = FakeCommandLedger()
    loop = loop_over([wake(op="close")], ledger)
    asyncio.run(loop.run())
    record(ledger, "after-close")
    asyncio.run(loop.expire_pending())
    found = ledger.get("t", "s", "after-close")
    assert found is not None and found.state is CommandState.EXPIRED


def test_a_session_past_its_spend_cap_ends_with_cost_cap_reached() -> None:
    import pytest

    from browser_task.errors import JobFailure

    ledger = FakeCommandLedger()
    loop = loop_over([None] * 10, ledger, idle_s=600)
    capped = SessionTerms(idle_timeout_s=600, max_cost_usd=0.01, cost_cap_s=25.0)
    loop.terms = capped
    with pytest.raises(JobFailure) as ended:
        asyncio.run(loop.run())
    assert ended.value.kind == "cost_cap_reached"
    assert "max_cost_usd 0.01" in str(ended.value)


class TakenAtTheClaim:
    """A person's takeover as the worker reads it: free as last read when the command's
    wake-up comes, held in the read made alongside the claim, handed back by the next read."""

    def __init__(self, ledger: FakeCommandLedger) -> None:
        self.ledger = ledger
        self.reads = 0
        self.free = True
        self.last_held = 0.0
        self.while_held: list[CommandState] = []

    async def look(self, named: str | None = None) -> None:
        self.reads += 1
        self.free = self.reads > 1

    async def wait_free(self) -> float:
        while not self.free:
            found = self.ledger.get("t", "s", "c")
            assert found is not None
            self.while_held.append(found.state)
            await self.look()
        return 0.0

    async def hold(self, *, look: bool = False) -> float:
        if look:
            await self.look()
        return await self.wait_free()


def test_a_command_claimed_as_a_person_takes_the_page_waits_pending_and_then_runs_once() -> None:
    ledger = FakeCommandLedger()
    person = TakenAtTheClaim(ledger)
    loop = loop_over([wake("c"), wake(op="close")], ledger, takeover=person)
    loop.ran = []
    record(ledger, "c")
    asyncio.run(loop.run())
    # Not run while held: the claim given back, the command pending (its caller reads why).
    assert person.while_held == [CommandState.PENDING]
    assert loop.ran == ["c"]
    found = ledger.get("t", "s", "c")
    assert found is not None and found.state is CommandState.DONE


class RecordedLate(FakeCommandLedger):
    """The API sends the wake-up while it writes the record: the first claim of "c" finds
    none, and that of "mid" finds it pending (written between the claim's write and read,
    as DynamoDB's claim can: pagefleet.adapters.dynamodb.session_commands)."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0

    def claim(self, tenant_id: str, session_id: str, command_id: str, **kw: Any) -> Any:
        self.claims += 1
        found = super().claim(tenant_id, session_id, command_id, **kw)
        if self.claims == 1 and command_id == "c":
            record(self, "c")  # the API's write lands just after the first look
        if command_id == "mid" and found.record is None:
            return Claim(verdict="unknown", record=record(self, "mid"))
        return found


def test_a_wakeup_that_comes_before_its_record_runs_the_command_once_it_is_written() -> None:
    ledger = RecordedLate()
    loop = loop_over([wake("c"), wake("mid"), wake("never"), wake(op="close")], ledger)
    asyncio.run(loop.run())
    assert loop.ran == ["c", "mid"]  # and "never", never recorded, dropped after a few looks
    assert ledger.claims == 2 + 2 + 1 + len(RECORD_WAITS_S)


class CountedClaims(FakeCommandLedger):
    def __init__(self) -> None:
        super().__init__()
        self.claims: list[str] = []

    def claim(self, tenant_id: str, session_id: str, command_id: str, **kw: Any) -> Any:
        self.claims.append(command_id)
        return super().claim(tenant_id, session_id, command_id, **kw)


def test_a_command_its_first_look_ran_costs_no_claim_when_its_wakeups_come() -> None:
    # The session's first step: sent while it started, found by the loop's first look, and
    # its wake-up (routed to the mailbox opened at the claim) and a copy come after it ran.
    ledger = CountedClaims()
    record(ledger, "first")
    loop = loop_over([wake("first"), wake("first"), wake(op="close")], ledger)
    asyncio.run(loop.run())
    assert loop.ran == ["first"]
    assert ledger.claims == ["first"]  # one claim: the copies are known to have run here


def test_a_wakeup_sent_while_the_page_is_made_reaches_the_session_not_dropped() -> None:
    from browser_task.run.inbox import WorkerInbox
    from browser_task.run.session_loop import begin_session
    from devstack.fakes.session_inbox import FakeInboxRegistry, FakeSessionInbox

    ledger = FakeCommandLedger()
    record(ledger, "sent-while-starting")
    inbox = WorkerInbox(FakeSessionInbox(), FakeInboxRegistry(), "inbox-w1")

    async def claimed_then_page() -> list[str]:
        # Begun as the claim is won: the mailbox first, then the look at the ledger.
        start = begin_session(inbox, ledger, "t", "s")
        inbox.route(wake("woken-while-page-is-made"))  # the page is still being made
        found = await start.pending
        woken = await start.mailbox.get(0)
        start.end()
        inbox.route(wake("after-the-end"))
        assert woken is not None and woken.command_id is not None
        return [c.command_id for c in found] + [woken.command_id]

    seen = asyncio.run(claimed_then_page())
    assert seen == ["sent-while-starting", "woken-while-page-is-made"]
    assert inbox.dropped == 1  # only the one for the session that had ended
    assert inbox.holding() == 0
