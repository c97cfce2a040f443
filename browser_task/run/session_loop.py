"""A browser session's run: commands one at a time from the ledger, in the job's context.

The runner calls ``run_session`` where a job would run its workflow: the claim, lease,
heartbeat, cancel watch, watchdog (the session's max duration) and outcome are the job's.
Each command's steps are planned as a job's are (``prepare.render_command``: templating,
secrets) and run through the executor's ``run_steps`` (the egress guard, timeouts, failure
classification); a step that fails is answered, not fatal, unless
the browser went with it. The session ends on a close wake-up, or after ``idle_timeout_s``
without a command. Commands come from the command ledger: the worker's inbox wakes the loop
with a command's id (browser_task.run.inbox), and the loop looks at the session's pending
commands itself when it starts and whenever it has waited ``POLL_S`` (a wake-up lost or sent
before this worker held the session delays a command, never loses it). The first look and
the session's mailbox begin as soon as the claim is won (``begin_session``), while the
page is made: the commands sent while the session was starting are known when its page is,
and a wake-up sent once the API could see the claim is routed to the mailbox, not dropped.
Each command runs only once its claim in the ledger wins (a duplicate wake-up or a retry
finds it taken or answered; a command past its deadline is expired), and its answer and the
steps that succeeded are recorded there: the record is the answer its caller reads. When the session
ends, its commands still pending are expired: nothing waits for a worker that is gone.
The result keeps how many steps succeeded (``step_count``), the data they extracted
(``data``) and why it ended (``closed_reason``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from browser_task.errors import FailJob, JobFailure, first_line
from browser_task.run.context import RunContext
from browser_task.run.executor import run_steps
from browser_task.run.inbox import Mailbox, WorkerInbox
from browser_task.run.observation import PageObserver, lasting_refs
from browser_task.run.plan import describe
from browser_task.run.prepare import TenantPolicies, evaluate_allowed, render_command
from browser_task.run.session_parts import AnswerParts, answer_error
from browser_task.run.takeover import PageTakeover
from pagefleet.browsing.commands import (
    Claim,
    CommandLedger,
    CommandRecord,
    CommandState,
    pending_commands,
)
from pagefleet.browsing.models import Answer, Command
from pagefleet.jobs.models import new_ulid
from pagefleet.jobs.session_terms import SessionTerms
from pagefleet.jobs.spend import COST_CAP_KIND
from pagefleet.live.events import EventType
from pagefleet.workflow import STEP_ADAPTER, Evaluate, Step, iter_steps

# The loop waits this long for a wake-up before it looks at the ledger itself (and a
# cancelled session's thread lingers this long).
POLL_S = 10
# A session keeps at most this many steps, a workflow's own bound.
MAX_RECORDED = 500
# A wake-up may come before its command's record (the API sends it while it writes the
# record): the claim looks again after each of these pauses (0.3 s in all), then drops it.
RECORD_WAITS_S = (0.005, 0.01, 0.02, 0.04, 0.08, 0.15)
# The commands this loop ran, remembered (the latest this many) so that a wake-up for one of
# them (a copy, or the wake-up of a command its first look found) costs no claim.
REMEMBERED_RAN = 256

log = logging.getLogger("browser_task.run.session_loop")
EvaluateAllowed = Callable[[], Awaitable[bool]]


@dataclass(frozen=True)
class SessionStart:
    """What a session's worker begins as soon as its claim is won, while its context and
    page are made: its mailbox (from then on, wake-ups for the session are routed to it,
    not dropped) and its first look at the ledger (the commands sent while it started)."""

    inbox: WorkerInbox
    session_id: str
    mailbox: Mailbox
    pending: asyncio.Task[list[CommandRecord]]

    def end(self) -> None:
        """The run ended (or never reached its loop): no more wake-ups routed to it."""
        self.inbox.close(self.session_id)
        if not self.pending.done():
            self.pending.cancel()
        elif not self.pending.cancelled():
            self.pending.exception()  # seen: a failed look is the loop's, if it ran


def begin_session(
    inbox: WorkerInbox, commands: CommandLedger, tenant_id: str, session_id: str
) -> SessionStart:
    """Open the session's mailbox, then look at its ledger (in that order: a command recorded
    after the look was either woken into the mailbox, or its wake-up is yet to come)."""
    mailbox = inbox.open(tenant_id, session_id)
    pending = asyncio.create_task(
        asyncio.to_thread(pending_commands, commands, tenant_id, session_id),
        name=f"session {session_id}: pending commands",
    )
    return SessionStart(inbox, session_id, mailbox, pending)


class SessionLoop:
    def __init__(
        self,
        ctx: RunContext,
        mailbox: Mailbox,
        terms: SessionTerms,
        *,
        commands: CommandLedger,
        evaluate_allowed: EvaluateAllowed,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        takeover: PageTakeover | None = None,
        first_look: Awaitable[list[CommandRecord]] | None = None,
    ) -> None:
        self.ctx = ctx
        # The ledger's first look, begun at the claim (None: the loop makes it as it starts).
        self._first_look = first_look
        self._ran: deque[str] = deque(maxlen=REMEMBERED_RAN)
        self.takeover = takeover  # a person holding the page: no command is taken meanwhile
        self.mailbox = mailbox
        self.terms = terms
        self.commands = commands
        self._wall = wall_clock
        self._evaluate_allowed = evaluate_allowed
        self._clock = clock
        self.recorded: list[dict[str, Any]] = []
        self.data: dict[str, Any] = {}
        self._parts = AnswerParts(ctx)
        self._observer = PageObserver(ctx, self._parts)
        # What the session ends with, kept in the context: a cancel or the watchdog write
        # the context's result, and the steps so far must survive them.
        self.ctx.result = self._result(None)

    def _result(self, reason: str | None) -> dict[str, Any]:
        # The steps themselves are in the command ledger, durable as each was answered
        # (pagefleet.browsing.commands): a record's size bound cannot drop them. The data is
        # masked with every secret the session has resolved so far, as a job's result is
        # (executor.run_workflow): a page may echo a secret back into what a step extracts.
        data = self.ctx.masker.value(self.data)
        return {"step_count": len(self.recorded), "data": data, "closed_reason": reason}

    async def run(self) -> dict[str, Any]:
        began = last = self._clock()
        if await self._pending(self._first_look):  # sent while the session was starting
            last = self._clock()
        while True:
            if self.takeover is not None:  # a person holding the page is activity
                last = max(last, self.takeover.last_held)
            idle_left = self.terms.idle_timeout_s - (self._clock() - last)
            if idle_left <= 0:
                return self._ended("idle")
            cap_left = self._cap_left(began)
            wait = max(0.05, min(POLL_S, idle_left, cap_left))
            wakeup = await self.mailbox.get(wait)
            if wakeup is None:
                ran = await self._pending()
            elif wakeup.op == "close":
                return self._ended("closed")
            else:
                ran = wakeup.command_id is not None and await self._once(wakeup.command_id)
            if ran:
                last = self._clock()  # idle counts from the end of the last steps

    def _cap_left(self, began: float) -> float:
        """Seconds of browser the session's ``max_cost_usd`` still buys; at 0 it ends with
        ``cost_cap_reached`` (checked between commands: a command under way finishes)."""
        cap_s = self.terms.cost_cap_s
        if cap_s is None:
            return float("inf")
        left = cap_s - (self._clock() - began)
        if left <= 0:
            raise FailJob(
                f"the session reached its spend cap (max_cost_usd {self.terms.max_cost_usd}): "
                "it was closed; open another with a higher max_cost_usd to go on",
                kind=COST_CAP_KIND,
            )
        return left

    async def _pending(self, looked: Awaitable[list[CommandRecord]] | None = None) -> bool:
        """Run the session's commands still pending, oldest first (as ``looked`` found them,
        or a look made now); True when any ran."""
        ctx = self.ctx
        if looked is None:
            looked = asyncio.to_thread(
                pending_commands, self.commands, ctx.tenant_id, ctx.plan.job_id
            )
        found = await looked
        ran = False
        for record in found:
            ran = await self._once(record.command_id) or ran
        return ran

    async def expire_pending(self) -> None:
        """The session ended: what was sent and not taken never runs (answered expired)."""
        ctx = self.ctx
        found = await asyncio.to_thread(
            pending_commands, self.commands, ctx.tenant_id, ctx.plan.job_id
        )
        for record in found:
            await asyncio.to_thread(
                self.commands.expire, ctx.tenant_id, ctx.plan.job_id, record.command_id
            )
            self._told(record.command_id, "expired", ok=False)

    async def _once(self, command_id: str) -> bool:
        """Run a command if its claim wins (a duplicate wake-up or a retry finds it taken or
        answered; one past its deadline is expired by the claim); True when its steps ran."""
        ctx = self.ctx
        if command_id in self._ran:
            return False  # ran here: answered in the ledger, its claim would find it taken
        key = (ctx.tenant_id, ctx.plan.job_id, command_id)
        claim = await self._claim(key)
        record = claim.record
        if claim.verdict != "run" or record is None:
            expired = record is not None and record.state is CommandState.EXPIRED
            if claim.verdict == "answered" and expired:
                self._told(command_id, "expired", ok=False)
            return False
        command = Command(
            id=new_ulid(),
            command_id=command_id,
            steps=record.body.steps,
            observe=record.body.observe,
        )
        before = len(self.recorded)
        self._ran.append(command_id)
        answer = await self._steps(command)
        # Durable before anyone is told: the record is the answer (a killed worker's
        # session keeps the step).
        await asyncio.to_thread(self.commands.finish, *key, answer, self.recorded[before:])
        self._told(command_id, "done", ok=answer.ok)
        return True

    async def _claim(self, key: tuple[str, str, str]) -> Claim:
        """The ledger's claim, made while no person holds the page: a command is not taken
        meanwhile, it stays pending (its caller reads why), and the time counts towards the
        session's max duration (it is its browser's). The lock is read alongside the claim,
        not before it (one round trip less on each command's path); a claim that finds the
        page held once both are in is given back (``running -> pending``) before any step.
        A command not recorded yet is looked for again a few times (its wake-up was sent
        while the API wrote it: ``RECORD_WAITS_S``)."""
        waits = iter(RECORD_WAITS_S)
        while True:
            if self.takeover is not None:
                await self.takeover.wait_free()  # held as last read: not taken meanwhile
            order = new_ulid()
            claiming = asyncio.to_thread(self.commands.claim, *key, now=self._wall(), order=order)
            if self.takeover is None:
                claim = await claiming
            else:
                claim, _ = await asyncio.gather(claiming, self.takeover.look())
            if claim.verdict == "unknown" and _on_its_way(claim.record):
                # The API wakes the worker while it writes the record: it may be on its way,
                # or have landed between the claim's conditional write and its read.
                pause = next(waits, None)
                if pause is None:
                    return claim  # never recorded (its call failed): nothing to run
                await asyncio.sleep(pause)
                continue
            if claim.verdict != "run" or self.takeover is None or self.takeover.free:
                return claim
            await asyncio.to_thread(self.commands.release, *key, order=order)
            # Given back: taken again (by this loop, or another delivery's) once it is free.

    def _told(self, command_id: str, state: str, *, ok: bool) -> None:
        """Followers (the live WebSocket) learn that a command has its answer."""
        if self.ctx.events is not None:
            self.ctx.events.emit(
                EventType.COMMAND,
                command_id=command_id,
                state=state,
                outcome="ok" if ok else "failed",
            )

    def _ended(self, reason: str) -> dict[str, Any]:
        self.ctx.result = self._result(reason)
        return self.ctx.result

    async def _steps(self, command: Command) -> Answer:
        ctx = self.ctx
        try:
            steps: list[Step] = [STEP_ADAPTER.validate_python(s) for s in command.steps]
        except ValidationError as exc:  # the API checked them: a version skew, at worst
            error = FailJob(f"invalid step: {first_line(str(exc))}", kind="invalid_workflow")
            return Answer(id=command.id, ok=False, error=answer_error(error))
        refusal = await self._refused(steps)
        if refusal is not None:
            return Answer(id=command.id, ok=False, error=answer_error(refusal))
        ran, failure = 0, None
        extracted: dict[str, Any] = {}
        made_before = set(ctx.artifacts.names)
        for given in steps:
            ctx.result = {}  # this step's extracts
            label = describe(given, ctx.masker)
            try:
                step = await lasting_refs(given, ctx.page)
                assert ctx.secrets is not None
                [ready], ctx.masker = await render_command(
                    [step], ctx.plan, ctx.secrets, ctx.masker
                )
            except JobFailure as exc:
                failure = exc.at_step(len(self.recorded), label)
                ctx.result = self._result(None)
                break
            try:
                await run_steps([ready], ctx, first=len(self.recorded), labels=[label])
            except JobFailure as exc:
                failure = exc
            finally:
                extracted.update(ctx.result)
                self.data.update(ctx.result)
                ctx.result = self._result(None)
                ctx.step_index = None
            if failure is not None:
                break
            self.recorded.append(
                step.model_dump(mode="json", exclude_unset=True, exclude_none=True)
            )
            ran += 1
        if failure is not None and (ctx.session.crashed or ctx.session.closed):
            raise failure  # the browser went with the step: the session ends with it
        answer = Answer(
            id=command.id,
            ok=failure is None,
            ran=ran,
            result=ctx.masker.value(extracted),
            error=answer_error(failure) if failure is not None else None,
            files=await self._parts.made(made_before),
        )
        return await self._observer.observed(answer, command.observe)

    async def _refused(self, steps: list[Step]) -> JobFailure | None:
        if len(self.recorded) + len(steps) > MAX_RECORDED:
            return FailJob(
                f"a session keeps at most {MAX_RECORDED} steps; save it and open another",
                kind="invalid_workflow",
            )
        evaluates = any(isinstance(s, Evaluate) for top in steps for _, s in iter_steps([top]))
        if evaluates and not await self._evaluate_allowed():
            return FailJob(
                "evaluate is not allowed for this tenant (policy allow_evaluate is off); "
                "ask an administrator to enable it, or remove the evaluate step",
                kind="evaluate_refused",
            )
        return None


async def run_session(
    ctx: RunContext,
    inbox: WorkerInbox | None,
    commands: CommandLedger | None,
    policies: TenantPolicies | None,
    start: SessionStart | None = None,
) -> dict[str, Any]:
    """The runner's entry: the session job's commands until it ends. ``start``: its mailbox
    and first look, begun at the claim (``begin_session``; None: begun here)."""
    terms = ctx.plan.request.session
    assert terms is not None
    if inbox is None or commands is None:
        raise FailJob("this worker takes no browser sessions", kind="not_configured")

    async def allowed() -> bool:
        return await evaluate_allowed(policies, ctx.tenant_id)

    if start is None:
        start = begin_session(inbox, commands, ctx.tenant_id, ctx.plan.job_id)
    loop = SessionLoop(
        ctx,
        start.mailbox,
        terms,
        commands=commands,
        evaluate_allowed=allowed,
        takeover=ctx.takeover,
        first_look=start.pending,
    )
    try:
        return await loop.run()
    finally:
        # Whatever ended it: no more wake-ups are routed to it, and what was sent and not
        # taken is answered expired (its caller reads that, never waits on).
        start.end()
        with contextlib.suppress(Exception):
            await loop.expire_pending()


def _on_its_way(record: CommandRecord | None) -> bool:
    """A claim found nothing to take, and no one else holds it: not recorded yet, or
    recorded just after the claim's write (found pending by its read)."""
    return record is None or record.state is CommandState.PENDING
