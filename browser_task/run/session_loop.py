"""A browser session's run: commands one at a time from its channel, in the job's context.

The runner calls ``run_session`` where a job would run its workflow: the claim, lease,
heartbeat, cancel watch, watchdog (the session's max duration) and outcome are the job's.
Each command's steps are planned as a job's are (``prepare.render_command``: templating,
secrets) and run through the executor's ``run_steps`` (the egress guard, timeouts, failure
classification); a step that fails is answered, not fatal, unless
the browser went with it. The session ends on a close command, after ``idle_timeout_s``
without one, or when its channel is gone. Each command runs only once its claim in the
command ledger wins (a duplicate delivery or a retry is answered from the record, a command
past its deadline is answered ``expired``), and its answer and the steps that succeeded are
recorded there before the answer is sent. The result keeps how many steps succeeded
(``step_count``), the data they extracted (``data``) and why it ended (``closed_reason``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError
from pydantic import ValidationError

from browser_task.errors import FailJob, JobFailure, first_line
from browser_task.observe.aria import aria_snapshot
from browser_task.observe.aria_view import shape
from browser_task.run.context import RunContext
from browser_task.run.executor import run_steps
from browser_task.run.plan import describe
from browser_task.run.prepare import TenantPolicies, evaluate_allowed, render_command
from browser_task.run.session_parts import AnswerParts
from pagefleet.browsing.channel import ChannelGone, SessionChannel
from pagefleet.browsing.commands import CommandLedger, CommandState, expired_answer
from pagefleet.browsing.models import Answer, AriaView, Command, Observation, Observe
from pagefleet.jobs.models import new_ulid
from pagefleet.jobs.session_terms import SessionTerms
from pagefleet.live.events import EventType
from pagefleet.specs.resources import DEBUG
from pagefleet.workflow import STEP_ADAPTER, Evaluate, Step, iter_steps

# A command long poll waits at most this (a cancelled session's thread lingers this long).
POLL_S = 10
# A session keeps at most this many steps, a workflow's own bound.
MAX_RECORDED = 500
OBSERVE_TIMEOUT_MS = 5_000
# The selector of an element by its ref in an "ai" ARIA snapshot.
ARIA_REF = "aria-ref="

log = logging.getLogger("browser_task.run.session_loop")
EvaluateAllowed = Callable[[], Awaitable[bool]]


class SessionLoop:
    def __init__(
        self,
        ctx: RunContext,
        channel: SessionChannel,
        terms: SessionTerms,
        *,
        commands: CommandLedger,
        evaluate_allowed: EvaluateAllowed,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.ctx = ctx
        self.channel = channel
        self.terms = terms
        self.commands = commands
        self._wall = wall_clock
        self._evaluate_allowed = evaluate_allowed
        self._clock = clock
        self.recorded: list[dict[str, Any]] = []
        self.data: dict[str, Any] = {}
        # The last ARIA snapshot of each scope observed ("" the page's): what a diff is against.
        self._last_aria: dict[str, str] = {}
        self._screenshots = 0
        self._parts = AnswerParts(ctx)
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
        last = self._clock()
        while True:
            idle_left = self.terms.idle_timeout_s - (self._clock() - last)
            if idle_left <= 0:
                return self._ended("idle")
            try:
                command = await asyncio.to_thread(
                    self.channel.next_command,
                    self.terms.channel,
                    wait_s=max(1, min(POLL_S, int(idle_left))),
                )
            except ChannelGone:
                return self._ended("closed")
            if command is None:
                continue
            if command.op == "close":
                await self._answer(Answer(id=command.id))
                return self._ended("closed")
            if await self._once(command):
                last = self._clock()  # idle counts from the end of the last steps

    async def _once(self, command: Command) -> bool:
        """Run a command if its claim wins, else answer it from its record (a duplicate
        delivery, a caller's retry, or expired); True when its steps ran."""
        ctx = self.ctx
        key = (ctx.tenant_id, ctx.plan.job_id, command.command_id or command.id)
        claim = await asyncio.to_thread(
            self.commands.claim, *key, now=self._wall(), order=new_ulid()
        )
        if claim.verdict == "unknown" or claim.record is None:
            return False  # never recorded, or taken by a delivery under way: not ours
        if claim.verdict == "answered":
            record = claim.record
            if record.state is CommandState.EXPIRED or record.answer is None:
                self._told(command, "expired", ok=False)
                await self._answer(expired_answer(command.id))
            else:
                await self._answer(record.answer.model_copy(update={"id": command.id}))
            return False
        before = len(self.recorded)
        answer = await self._steps(command)
        # Durable before it is answered: a killed worker's session keeps the step.
        await asyncio.to_thread(self.commands.finish, *key, answer, self.recorded[before:])
        self._told(command, "done", ok=answer.ok)
        await self._answer(answer)
        return True

    def _told(self, command: Command, state: str, *, ok: bool) -> None:
        """Followers (the live WebSocket) learn that a command has its answer."""
        if self.ctx.events is not None:
            self.ctx.events.emit(
                EventType.COMMAND,
                command_id=command.command_id or command.id,
                state=state,
                outcome="ok" if ok else "failed",
            )

    def _ended(self, reason: str) -> dict[str, Any]:
        self.ctx.result = self._result(reason)
        return self.ctx.result

    async def _answer(self, answer: Answer) -> None:
        try:
            await asyncio.to_thread(self.channel.send_answer, self.terms.channel, answer)
        except ChannelGone:  # its caller is gone with it
            pass
        except Exception as exc:  # the session goes on: its caller reads the answer's record
            log.warning("sending a session's answer failed: %s", first_line(str(exc)))

    async def _steps(self, command: Command) -> Answer:
        ctx = self.ctx
        try:
            steps: list[Step] = [STEP_ADAPTER.validate_python(s) for s in command.steps]
        except ValidationError as exc:  # the API checked them: a version skew, at worst
            error = FailJob(f"invalid step: {first_line(str(exc))}", kind="invalid_workflow")
            return Answer(id=command.id, ok=False, error=_error(error))
        refusal = await self._refused(steps)
        if refusal is not None:
            return Answer(id=command.id, ok=False, error=_error(refusal))
        ran, failure = 0, None
        extracted: dict[str, Any] = {}
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
            error=_error(failure) if failure is not None else None,
        )
        return await self._observed(answer, command.observe)

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

    async def _observed(self, answer: Answer, observe: Observe) -> Answer:
        """The page after the steps: URL, title, ARIA snapshot, a screenshot if asked; what
        is too large for the answer kept apart (session_parts)."""
        ctx = self.ctx
        page = ctx.page
        if ctx.session.closed or page.is_closed():
            return await self._parts.bounded(answer, None)
        seen: dict[str, Any] = {"url": ctx.mask(page.url)}
        key: str | None = None
        tree: str | None = None
        with contextlib.suppress(PlaywrightError, TimeoutError):
            seen["title"] = ctx.mask(await page.title())
        view = observe.aria_view()
        if view is not None:
            aria, tree = await self._aria(page, view)
            seen.update(aria)
        tabs = await _tabs(page, ctx.mask)
        if tabs:
            seen["tabs"] = tabs
        if observe.screenshot:
            self._screenshots += 1
            name = f"session-{self._screenshots:04d}.png"
            try:
                data = await page.screenshot(type="png", timeout=OBSERVE_TIMEOUT_MS)
                ctx.artifacts.add(name, data, "image/png", retention=DEBUG)
                key = (await ctx.artifacts.uploaded(name)).key
                seen["screenshot"] = name
            except (PlaywrightError, JobFailure) as exc:
                seen["screenshot"] = None
                if answer.error is None:
                    problem = first_line(str(getattr(exc, "message", None) or exc))
                    error = FailJob(f"the screenshot failed: {problem}", kind="observe_failed")
                    answer = answer.model_copy(update={"error": _error(error)})
        observation = Observation.model_validate(seen)
        answer = answer.model_copy(update={"observation": observation, "screenshot_key": key})
        return await self._parts.bounded(answer, tree)

    async def _aria(self, page: Any, view: AriaView) -> tuple[dict[str, Any], str | None]:
        """The observation's ARIA fields: the snapshot of the page (or of ``scope``), shaped;
        and the whole masked tree (what session_parts keeps when it is longer than inline)."""
        try:
            # "ai" mode: iframes' content too, and each element's ref, which the selector
            # aria-ref=REF reaches (lasting_refs makes it a lasting one in the steps kept).
            tree = self.ctx.mask(
                await aria_snapshot(page, timeout_ms=OBSERVE_TIMEOUT_MS, scope=view.scope)
            )
        except (PlaywrightError, TimeoutError) as exc:
            problem = first_line(str(getattr(exc, "message", None) or exc))
            if view.scope:
                problem = f"scope {view.scope!r} matched nothing in time: {problem}"
            return {"aria_error": problem}, None
        key = view.scope or ""
        shaped = shape(tree, self._last_aria.get(key), max_chars=view.max_chars, diff=view.diff)
        self._last_aria[key] = tree
        fields = {
            "aria_snapshot": shaped.text,
            "aria_truncated": shaped.truncated,
            "aria_diff": shaped.diff if view.diff else None,
            "aria_chars": shaped.chars,
        }
        # A diff is the agent's own budget: the whole tree is kept apart only for a full one.
        return fields, None if shaped.diff else tree


async def run_session(
    ctx: RunContext,
    channel: SessionChannel | None,
    commands: CommandLedger | None,
    policies: TenantPolicies | None,
) -> dict[str, Any]:
    """The runner's entry: the session job's commands until it ends."""
    terms = ctx.plan.request.session
    assert terms is not None
    if channel is None or commands is None:
        raise FailJob("this worker takes no browser sessions", kind="not_configured")

    async def allowed() -> bool:
        return await evaluate_allowed(policies, ctx.tenant_id)

    try:
        loop = SessionLoop(ctx, channel, terms, commands=commands, evaluate_allowed=allowed)
        return await loop.run()
    finally:
        # Its queues go with it, whatever ended it: a caller's next step finds them gone
        # and reads the session's end from its record.
        with contextlib.suppress(Exception):
            await asyncio.to_thread(channel.close, terms.channel)


async def lasting_refs(step: Step, page: Any) -> Step:
    """``step`` with an ``aria-ref=REF`` selector (a ref of the last observation) made the
    lasting selector of the element it names (role and name, test id...): the step runs on
    that element, and is kept so, for a saved workflow to find it again in a later run."""
    selector = getattr(step, "selector", None)
    if not (isinstance(selector, str) and selector.startswith(ARIA_REF)):
        return step
    try:
        normalized = await asyncio.wait_for(
            page.locator(selector).normalize(), OBSERVE_TIMEOUT_MS / 1000
        )
    except (PlaywrightError, TimeoutError) as exc:
        raise FailJob(
            f"{selector} is not in the page's last observation "
            f"({first_line(str(getattr(exc, 'message', None) or exc))}): observe again and "
            "use a ref from it",
            kind="step_failed",
        ) from None
    # The driver's resolved selector (Python has no locator generator of its own).
    resolved = normalized._impl_obj._selector
    kept = step.model_dump(mode="json", exclude_unset=True, exclude_none=True)
    kept.pop("frame", None)  # a ref is the page's: its lasting selector enters the frames
    return STEP_ADAPTER.validate_python({**kept, "selector": resolved})


async def _tabs(page: Any, mask: Callable[[str], str]) -> list[dict[str, Any]]:
    """The context's pages when a popup or a new tab opened beside the session's own."""
    pages = [p for p in page.context.pages if not p.is_closed()]
    if len(pages) < 2:
        return []
    out = []
    for index, other in enumerate(pages):
        title = ""
        with contextlib.suppress(PlaywrightError, TimeoutError):
            title = await other.title()
        tab = {"index": index, "url": mask(other.url), "title": mask(title)}
        out.append({**tab, "current": True} if other is page else tab)
    return out


def _error(failure: JobFailure) -> dict[str, Any]:
    return failure.to_job_error().model_dump(exclude_none=True)
