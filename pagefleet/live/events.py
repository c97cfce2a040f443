"""Run events: what a job's worker reports while the job runs, as stored and served.

Each event has a per-job sequence number (``seq``, increasing across attempts), a time
(``at``) and a ``type``. The worker writes them in batches (``browser_task.observe.run_events``);
``GET /v1/jobs/{id}/events`` lists them; the live WebSocket API delivers them as they are
written. Text is masked (secret values) and clipped before it is stored; the number of
events per job is bounded, and one ``truncated`` event says how many were dropped.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.jobs.models import epoch_of_iso, iso
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus


class EventType(StrEnum):
    STATE = "state"  # the attempt started running / ended with a status
    STEP_STARTED = "step_started"
    STEP_FINISHED = "step_finished"
    NAVIGATION = "navigation"  # the page's main frame went to a URL
    RETRY = "retry"  # the attempt failed and the job will run again
    LOG = "log"  # a worker log line about this job
    CONSOLE = "console"  # the page's console (options.capture_console)
    PAGE_ERROR = "page_error"  # an uncaught error in the page (options.capture_console)
    TRUNCATED = "truncated"  # events were dropped past the per-job bound
    # An irreversible step's checkpoint (started, done, not_done, unknown), and the job's
    # compensation (started, done, failed): docs/irreversible-steps.md.
    CHECKPOINT = "checkpoint"
    COMPENSATION = "compensation"
    # A browser session's command has its answer (done) or never ran (expired).
    COMMAND = "command"
    # A page's dialog (alert, confirm, prompt, beforeunload) and how it was answered.
    DIALOG = "dialog"
    # A person took the page over, handed it back, or it returned after their idle time.
    TAKEOVER = "takeover"


# Kinds every job keeps whatever the bound: a follower must always see how an attempt ended.
UNBOUNDED_TYPES = frozenset(
    {
        EventType.STATE,
        EventType.RETRY,
        EventType.TRUNCATED,
        EventType.CHECKPOINT,
        EventType.COMPENSATION,
        EventType.COMMAND,
        EventType.TAKEOVER,
    }
)

TEXT_MAX_CHARS = 2000
URL_MAX_CHARS = 2000
LABEL_MAX_CHARS = 500
DEFAULT_MAX_EVENTS = 2000
# Events of a job are kept this long after its creation unless the job record has its own
# expiry (``expires_at``), which they then share.
DEFAULT_RETENTION_S = 30 * 24 * 3600


class RunEvent(BaseModel):
    """One event of a job's run. Fields beyond ``seq``/``at``/``type`` depend on the type."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    seq: int = Field(description="per-job sequence number, increasing across attempts")
    at: str = Field(description="when it happened (ISO 8601, UTC, milliseconds)")
    type: EventType
    attempt: int | None = Field(default=None, description="the attempt it belongs to")
    # state
    status: str | None = Field(default=None, description="state: the job's status")
    # steps: top-level index, path of a nested step (e.g. steps[3].steps[1]), masked label
    index: int | None = Field(default=None, description="step: top-level index (0-based)")
    of: int | None = Field(default=None, description="step: number of top-level steps")
    path: str | None = None
    action: str | None = None
    label: str | None = Field(default=None, description="step: the step as the user reads it")
    duration_ms: int | None = None
    cost_usd: float | None = Field(
        default=None,
        description="step_finished: the step's share of the job's price (its browser time "
        "at the rate GET /v1/usage prices, us-east-1)",
    )
    outcome: str | None = Field(
        default=None, description="step_finished: ok | failed; dialog: accepted | dismissed"
    )
    # navigation
    url: str | None = None
    # retry
    reason: str | None = None
    kind: str | None = Field(default=None, description="retry: the error kind")
    delay_s: int | None = None
    # log, console, page_error
    level: str | None = None
    message: str | None = None
    # dialog (message: its text; outcome: accepted | dismissed; index: the dialog step's)
    dialog: str | None = Field(
        default=None, description="dialog: alert | confirm | prompt | beforeunload"
    )
    # truncated
    dropped: int | None = None
    # checkpoint (index, label), compensation (message: why it failed)
    state: str | None = Field(
        default=None,
        description="checkpoint: started | done | not_done | unknown; "
        "compensation: started | done | failed; command: done | expired; "
        "takeover: taken | handed_back | returned",
    )
    how: str | None = Field(default=None, description="checkpoint: ran | checked | resolved")
    # command (state: done | expired; outcome: ok | failed)
    command_id: str | None = Field(default=None, description="command: the session's command")
    # takeover (state: taken | handed_back | returned; until: when it returns unless used)
    holder: str | None = Field(default=None, description="takeover: tenant:key_id holding it")
    until: int | None = Field(default=None, description="takeover: taken until (epoch s)")

    def wire(self) -> dict[str, Any]:
        """The compact JSON form (stored, served and sent): unset fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


def ended(status: JobStatus) -> bool:
    """Whether a job in ``status`` is done as far as its client is concerned: a final state,
    dead-lettered (kept for an operator's redrive, which would be a new ending) or in review
    (waiting for a person's resolution, which would be one too)."""
    return status.is_settled


def clip_text(text: str, limit: int = TEXT_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def now_iso(epoch: float) -> str:
    """``epoch`` as the records write times (``jobs.models.iso``)."""
    return iso(datetime.fromtimestamp(epoch, UTC))


def events_expire_at(job: JobRecord, retention_s: int = DEFAULT_RETENTION_S) -> int:
    """When a job's events expire: with the job record when it has an expiry of its own,
    else ``retention_s`` after the job was created (the table's TTL deletes them)."""
    own = getattr(job, "expires_at", None)  # the data-lifecycle TTL, where records carry one
    if isinstance(own, int | float) and own > 0:
        return int(own)
    created = job.created_at
    with contextlib.suppress(ValueError):
        return int(epoch_of_iso(created)) + retention_s
    return int(datetime.now(UTC).timestamp()) + retention_s
