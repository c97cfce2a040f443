"""A run's plan: everything one attempt needs, settled before its browser context exists.

``prepare.prepare_run`` builds it once per attempt, and nothing changes it afterwards: the
steps are rendered (``{{inputs.x}}``, ``{{secrets.NAME}}``, ``{{job.id}}``, parents'
results), the options too, the secrets resolved and folded into one masker, the saved
logins of the workflow's leading ``use_session`` steps loaded into the context's storage
state. The run only reads it: no step is rendered, no secret resolved, no policy read once
the browser work has begun.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.workflow import Step
from pagefleet.workflow.masking import Masker

if TYPE_CHECKING:
    from browser_task.tenant.logins import StorageState


@dataclass(frozen=True)
class RunPlan:
    tenant_id: str
    job_id: str
    attempt: int
    # The attempt's number since the job's last redrive (1: its first try; a retry is 2 or
    # more): what the trace modes count (browser_task.browser.tracing).
    tries: int
    # The request as submitted: what a user wrote (labels, errors and events name it).
    request: JobRequest
    # The job's options with their references substituted (proxy credentials, headers).
    options: JobOptions
    # The workflow's top-level steps and the job's compensate steps, rendered.
    steps: tuple[Step, ...]
    compensate: tuple[Step, ...]
    # Each top-level step as errors and events name it: its label and arguments as
    # submitted (references, not their values), secrets masked.
    labels: tuple[str, ...]
    # The run's resolved secret values: nothing it reports may contain them.
    masker: Masker
    # {{job.idempotency_key}}: the key the job was submitted with.
    idempotency_key: str | None = None
    # The storage state the context is created with (the leading use_session steps), and
    # the indexes of those steps (applied already: they do nothing when they run).
    storage_state: StorageState | None = None
    applied_sessions: frozenset[int] = frozenset()
    # An offline replay: the replayed job's har.zip, which alone answers the page.
    replay_har: bytes | None = None


def labels(steps: Sequence[Step], masker: Masker) -> tuple[str, ...]:
    """Every step of a workflow as errors and events name it (one call for the plan)."""
    return tuple(describe(step, masker) for step in steps)


def describe(step: Step, masker: Masker) -> str:
    """A step as errors and events name it, its secrets masked."""
    return step_label(step, masker.text(step.describe()))


def step_label(step: Step, text: str) -> str:
    """A step as errors and events name it: its label, then its arguments (bounded)."""
    if step.label:
        text = f"{step.label}: {text}"
    return text if len(text) <= 500 else text[:499] + "…"
