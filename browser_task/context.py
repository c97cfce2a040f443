"""What a step handler gets: the page, the job, and where results and artifacts go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from playwright.async_api import Page

from browser_task.artifacts import ArtifactCollector
from browser_task.browser import BrowserSession
from browser_task.egress import EgressGuard
from pagefleet.models import JobRequest
from pagefleet.workflow import Goto, Step, WaitFor
from pagefleet.workflow.templating import mask_secrets


class SecretsResolver(Protocol):
    """Resolves ``{{secrets.NAME}}`` for a tenant; None when the tenant has no such secret."""

    async def resolve(self, tenant_id: str, name: str) -> str | None: ...


class NoSecrets:
    """The resolver until Secrets Manager is wired in: every secret is missing."""

    async def resolve(self, tenant_id: str, name: str) -> str | None:
        return None


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
    result: dict[str, Any] = field(default_factory=dict)
    secret_values: set[str] = field(default_factory=set)
    step_index: int | None = None

    @property
    def page(self) -> Page:
        return self.session.page

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
