"""What a step handler gets: the page, the job, and where results and artifacts go."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from playwright.async_api import FrameLocator, Page

from browser_task.browser.pool import BrowserSession
from browser_task.egress.guard import EgressGuard
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.ports import SecretStore
from pagefleet.workflow import Goto, Step, WaitFor
from pagefleet.workflow.templating import mask_secrets

if TYPE_CHECKING:
    from browser_task.browser.tracing import TraceRecorder
    from browser_task.egress.proxy import Decision
    from browser_task.observe.run_events import RunEvents
    from browser_task.run.checkpointing import Progress
    from browser_task.tenant.logins import SessionStore, StorageState


# Resolves ``{{secrets.NAME}}`` for a tenant; None when the tenant has no such secret.
SecretsResolver = SecretStore


@dataclass
class PreparedRun:
    """Everything settled before a browser context exists (see ``executor.prepare_run``)."""

    # Resolved {{secrets.NAME}} values for this job only; never written anywhere.
    secrets: dict[str, str] = field(default_factory=dict)
    # Storage state to create the context with (the workflow's leading use_session steps).
    storage_state: StorageState | None = None
    # Indexes of the leading use_session steps already applied through storage_state.
    applied_sessions: frozenset[int] = frozenset()
    # The job's options with {{inputs.x}} / {{secrets.NAME}} substituted (None: as submitted).
    options: JobOptions | None = None
    # The results of the parent jobs the workflow reads ({{parents.<id>.result.<field>}}).
    parents: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunContext:
    tenant_id: str
    job_id: str
    attempt: int
    request: JobRequest
    session: BrowserSession
    guard: EgressGuard
    artifacts: ArtifactCollector
    secrets: SecretsResolver
    sessions: SessionStore | None = None
    prepared: PreparedRun = field(default_factory=PreparedRun)
    trace: TraceRecorder | None = None
    result: dict[str, Any] = field(default_factory=dict)
    secret_values: set[str] = field(default_factory=set)
    step_index: int | None = None
    # >0 while running a paginate block: extract results accumulate instead of replacing.
    paginate_depth: int = 0
    # The egress proxy's refusals since this job started (to explain a refused redirect).
    egress_refusals: Callable[[], list[Decision]] | None = None
    # Where the run's events go (steps, navigations, console); None: not recorded.
    events: RunEvents | None = None
    # The attempt's checkpoints of irreversible steps (None: not recorded, tools and tests).
    progress: Progress | None = None
    # {{job.idempotency_key}}: the key the job was submitted with.
    idempotency_key: str | None = None
    # The page as the last irreversible step was about to act (the failure's HTML when it
    # was still waiting for that step's answer).
    html_before_irreversible: str | None = None
    # The PNG of the screenshot ``monitor`` tracks (masked), kept for the comparison.
    tracked_screenshot: bytes | None = None

    def __post_init__(self) -> None:
        self.secret_values.update(v for v in self.prepared.secrets.values() if v)

    @property
    def page(self) -> Page:
        return self.session.page

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

    def mask(self, text: str) -> str:
        return mask_secrets(text, self.secret_values) if self.secret_values else text

    def timeout_ms(self, step: Step) -> int:
        """The step's own timeout, else the job's navigation or action timeout."""
        if step.timeout_ms is not None:
            return step.timeout_ms
        if is_navigation(step):
            return self.request.options.navigation_timeout_ms
        return self.request.options.action_timeout_ms


def is_navigation(step: Step) -> bool:
    """Steps whose timeout is a navigation timeout (the page loading), not an action one."""
    return isinstance(step, Goto) or (isinstance(step, WaitFor) and step.selector is None)
