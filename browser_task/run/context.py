"""What a step handler gets: the run's plan, its page, and where results and artifacts go."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from playwright.async_api import FrameLocator, Page

from browser_task.browser.pool import JobBrowser
from browser_task.egress.guard import EgressGuard
from browser_task.run.plan import RunPlan
from browser_task.run.url_patterns import SearchBudget
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.jobs.ports import SecretStore
from pagefleet.live.events import EventType
from pagefleet.workflow import Back, Forward, Goto, Step, WaitFor
from pagefleet.workflow.masking import Masker

if TYPE_CHECKING:
    from browser_task.browser.page_view import NavigationWatch
    from browser_task.browser.tracing import TraceRecorder
    from browser_task.egress.proxy import Decision
    from browser_task.observe.run_events import RunEvents
    from browser_task.run.checkpointing import Progress
    from browser_task.run.dialogs import DialogWatch
    from browser_task.run.routing import RequestRouter
    from browser_task.run.takeover import PageTakeover
    from browser_task.tenant.logins import SessionStore
    from pagefleet.browsing.commands import CommandLedger

# Beyond an irreversible step's own timeout, how long a stop waits for its checkpoint.
STEP_SETTLE_MARGIN_S = 5.0


@dataclass(eq=False)
class RunContext:
    """One attempt as it runs: the plan it follows (never changed), the browser context it
    runs in, and what the run has come to (its result, the step under way)."""

    plan: RunPlan
    session: JobBrowser
    guard: EgressGuard
    artifacts: ArtifactCollector
    sessions: SessionStore | None = None
    # Where a browser session resolves its commands' secrets as they come (a job's are in
    # its plan already).
    secrets: SecretStore | None = None
    # A browser session's commands, reached as its tenant (None: a job, or no job role).
    commands: CommandLedger | None = None
    trace: TraceRecorder | None = None
    # The egress proxy's refusals since this job started (to explain a refused redirect).
    egress_refusals: Callable[[], list[Decision]] | None = None
    # Where the run's events go (steps, navigations, console); None: not recorded.
    events: RunEvents | None = None
    # The attempt's checkpoints of irreversible steps (None: not recorded, tools and tests).
    progress: Progress | None = None
    # Whether the main frame waits for a navigation's answer (how the failure reads the page).
    navigation: NavigationWatch | None = None
    # The page's dialogs: what the next one gets (options.dialogs, a dialog step).
    dialogs: DialogWatch | None = None
    # The job's own routes (options.block, route steps) and what they did.
    router: RequestRouter | None = None
    # The bound on the attempt's URL globs and patterns (the router's, when there is one).
    url_budget: SearchBudget = field(default_factory=SearchBudget)
    # A person holding the page (a takeover): no step starts meanwhile.
    takeover: PageTakeover | None = None
    # Asks the worker to let this run's slot go while it waits for a person (await_human):
    # True when it did (browser_task.run.signals.SlotSignals.leave_slot).
    leave_slot: Callable[[], bool] = lambda: False
    # --- what the run has come to ---------------------------------------------------------
    result: dict[str, Any] = field(default_factory=dict)
    step_index: int | None = None
    # >0 while running a paginate block: extract results accumulate instead of replacing.
    paginate_depth: int = 0
    # The page as the last irreversible step was about to act (the failure's HTML when the
    # page cannot be read at the end).
    html_before_irreversible: str | None = None
    # The PNG of the screenshot ``monitor`` tracks (masked), kept for the comparison.
    tracked_screenshot: bytes | None = None
    # Time spent waiting for a person (await_human, monotonic seconds): job_timeout_s is
    # the run's own time, so the watchdog does not count it.
    human_waited_s: float = 0.0
    human_wait_started: float | None = None
    # The plan's masker; a browser session's grows as its commands resolve secrets.
    masker: Masker = field(init=False)
    page: Page = field(init=False)

    def __post_init__(self) -> None:
        self.masker = self.plan.masker
        self.page = self.session.page

    @property
    def tenant_id(self) -> str:
        return self.plan.tenant_id

    def scope(self, frame: str | list[str] | None) -> Page | FrameLocator:
        """Where a step's selector is resolved: the page, or the document of an iframe
        (nested iframes: each selector inside the previous one's document)."""
        if frame is None:
            return self.page
        path = [frame] if isinstance(frame, str) else frame
        scope = self.page.frame_locator(path[0])
        for inner in path[1:]:
            scope = scope.frame_locator(inner)
        return scope

    async def hold_for_person(self, step: int | None = None) -> None:
        """Before a step (``step``: its index): wait while a person holds the page; the time
        waited is not the run's own (job_timeout_s does not count it)."""
        takeover = self.takeover
        if takeover is None or takeover.free:
            return
        if self.events is not None and takeover.held is not None:
            # Said once per wait, before it: a follower sees why the next step has not begun.
            self.events.emit(
                EventType.LOG,
                level="info",
                message=f"{'the next step' if step is None else f'step {step}'} waits: "
                f"{takeover.held.holder} holds the page",
            )
        self.human_wait_started = time.monotonic()
        try:
            await takeover.hold()
        finally:
            started, self.human_wait_started = self.human_wait_started, None
            if started is not None:
                self.human_waited_s += time.monotonic() - started

    def paused_s(self, now: float) -> float:
        """How long the run has waited for a person so far (``now``: time.monotonic())."""
        started = self.human_wait_started
        return self.human_waited_s + (now - started if started is not None else 0.0)

    def mask(self, text: str) -> str:
        return self.masker.text(text)

    def settle_bound_s(self) -> float:
        """How long a stop waits for the step under way: its own timeout and a margin."""
        steps = self.plan.steps
        index = self.step_index
        step = steps[index] if index is not None and index < len(steps) else None
        return (self.timeout_ms(step) if step is not None else 0) / 1000 + STEP_SETTLE_MARGIN_S

    def timeout_ms(self, step: Step) -> int:
        """The step's own timeout, else the job's navigation or action timeout; while an
        irreversible step acts, no longer than its lease allows (``Progress.act_within_ms``)."""
        options = self.plan.request.options
        if step.timeout_ms is not None:
            own = step.timeout_ms
        elif is_navigation(step):
            own = options.navigation_timeout_ms
        else:
            own = options.action_timeout_ms
        return own if self.progress is None else self.progress.act_within_ms(own)


def is_navigation(step: Step) -> bool:
    """Steps whose timeout is a navigation timeout (the page loading), not an action one."""
    return isinstance(step, Goto | Back | Forward) or (
        isinstance(step, WaitFor) and step.selector is None
    )
