"""Browser sessions as the API and the worker see them: terms, commands, answers, views."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pagefleet import ids
from pagefleet.errors import InvalidField
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.record_size import json_bytes
from pagefleet.jobs.session_terms import (
    DEFAULT_IDLE_S,
    DEFAULT_MAX_DURATION_S,
    MAX_COST_USD,
    MAX_DURATION_S,
    MAX_IDLE_S,
)
from pagefleet.jobs.takeover import TakeoverView
from pagefleet.specs.pools import POOL_NAME_PATTERN
from pagefleet.specs.resources import DEFAULT_POOL
from pagefleet.view import View
from pagefleet.workflow import Step
from pagefleet.workflow.versions import NAME_PATTERN, InputValue

MAX_STEPS_PER_CALL = 20
# How long a steps call waits for its answer before it answers 202 with the command's id:
# long enough for most steps (a goto, a click) to be answered in the call, short enough that
# an API execution is not held for a browser (docs/api.md, "Browser sessions").
DEFAULT_WAIT_S = 10
# Under API Gateway's 29 s integration timeout, with room for the read that follows.
MAX_WAIT_S = 25
# A caller may give its own command id: what an Idempotency-Key may be, kept short.
COMMAND_ID_PATTERN = ids.COMMAND_ID
# A command not started this long after it was sent is answered ``expired`` and never runs.
DEFAULT_DEADLINE_S = 60
# A command waits for its worker at most this long (the ledger keeps it; a longer wait
# would hold a caller's retry in doubt for no use).
MAX_DEADLINE_S = 900
# The steps of one command, as JSON, at most: the command's DynamoDB record (400 KB) keeps
# them as sent and again as they succeeded, with the answer (a file an upload step carries
# is the only large part a step has).
MAX_COMMAND_STEPS_BYTES = 120_000
# The ARIA snapshot an observation carries, at most (a long page's tree is cut, and says so).
ARIA_MAX_CHARS = 20_000
# waiting_for_human: an await_human step waits for a person (POST /v1/jobs/{id}/continue).
SessionStatus = Literal["starting", "ready", "waiting_for_human", "closed", "lost"]


class OpenSession(BaseModel):
    """``POST /v1/browser-sessions``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    options: JobOptions = Field(default_factory=JobOptions)
    use_session: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=ids.SAVED_LOGIN_NAME,
        description="a saved login session (save_session) to open the browser with",
    )
    idle_timeout_s: int = Field(
        default=DEFAULT_IDLE_S,
        ge=5,
        le=MAX_IDLE_S,
        description="closed after this long without a step",
    )
    max_duration_s: int = Field(
        default=DEFAULT_MAX_DURATION_S,
        ge=10,
        le=MAX_DURATION_S,
        description="closed this long after it started, whatever happens",
    )
    pool: str = Field(
        default=DEFAULT_POOL, pattern=POOL_NAME_PATTERN, description="the worker pool"
    )
    name: str | None = Field(default=None, max_length=200)
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=MAX_COST_USD,
        description="closed (error.kind cost_cap_reached) once it has cost this much, "
        "priced as GET /v1/usage prices a job",
    )


class AriaView(BaseModel):
    """How much of the page's ARIA snapshot an observation carries: an agent's budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="a selector: the snapshot of its first match only",
    )
    max_chars: int = Field(
        default=ARIA_MAX_CHARS,
        ge=100,
        le=ARIA_MAX_CHARS,
        description="cut the snapshot at this many characters (aria_truncated says so)",
    )
    diff: bool = Field(
        default=False,
        description="only the lines that changed since this session's last observation "
        "of the same scope (+ added, - removed)",
    )


class Observe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    screenshot: bool = False
    aria: bool | AriaView = Field(
        default=True, description="include the page's ARIA snapshot (true, or how much of it)"
    )

    def aria_view(self) -> AriaView | None:
        if self.aria is False:
            return None
        return self.aria if isinstance(self.aria, AriaView) else AriaView()


class StepsRequest(BaseModel):
    """``POST /v1/browser-sessions/{id}/steps``: one step, or a list run in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: Step | None = None
    steps: list[Step] | None = Field(
        default=None,
        max_length=MAX_STEPS_PER_CALL,
        description="steps run in order; an empty list only observes the page",
    )
    observe: Observe = Field(default_factory=Observe)
    command_id: str | None = Field(
        default=None,
        pattern=COMMAND_ID_PATTERN,
        description="the command's id, the caller's (as Idempotency-Key): a retry with the "
        "same id is answered from the first, never run again",
    )
    wait_s: int = Field(
        default=DEFAULT_WAIT_S,
        ge=0,
        le=MAX_WAIT_S,
        description="how long the call waits for the answer; after it, 202 with the "
        "command's id (read it with GET .../commands/{command_id}); 0 never waits",
    )
    deadline_s: int = Field(
        default=DEFAULT_DEADLINE_S,
        ge=1,
        le=MAX_DEADLINE_S,
        description="the steps start within this many seconds or never (answered expired)",
    )

    @field_validator("step", "steps")
    @classmethod
    def _bounded(cls, given: Step | list[Step] | None) -> Step | list[Step] | None:
        steps = given if isinstance(given, list) else [given] if given is not None else []
        dumped = [s.model_dump(mode="json", exclude_unset=True, exclude_none=True) for s in steps]
        if json_bytes(dumped) > MAX_COMMAND_STEPS_BYTES:
            raise ValueError(
                f"the steps of one call are at most {MAX_COMMAND_STEPS_BYTES} bytes as JSON "
                "(a file an upload carries counts): send fewer, or a smaller file"
            )
        return given

    def all_steps(self) -> list[Step]:
        if (self.step is None) == (self.steps is None):
            raise InvalidField("give one step or a list of steps (steps)", field="step")
        return [self.step] if self.step is not None else list(self.steps or [])


class Command(BaseModel):
    """A command as the session's worker runs it, read from its ledger record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str  # this run's (a ULID): its answer's id
    steps: list[dict[str, Any]] = Field(default_factory=list)
    observe: Observe = Field(default_factory=Observe)
    # The ledger's record it runs under (pagefleet.browsing.commands).
    command_id: str


class Observation(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str | None = None
    title: str | None = None
    aria_snapshot: str | None = None
    aria_truncated: bool = False
    aria_diff: bool | None = Field(
        default=None, description="aria_snapshot holds only the changed lines (+/-)"
    )
    aria_chars: int | None = Field(default=None, description="the whole snapshot's length")
    aria_error: str | None = None
    tabs: list[dict[str, Any]] | None = Field(
        default=None,
        description="every tab of the session's browser when a popup or new tab opened "
        "(index, url, title; `current` the one steps act on)",
    )
    dialogs: list[dict[str, Any]] | None = Field(
        default=None,
        description="the dialogs (alert, confirm, prompt) that came since the last "
        "observation: type, message, answer (accepted or dismissed), prompt_text",
    )
    screenshot: str | None = Field(default=None, description="the screenshot artifact's name")
    screenshot_url: str | None = Field(default=None, description="a short presigned link")


# An answer's extracted data up to this size travels inline; a larger one is a part in S3.
# The answer goes on an SQS message (256 KiB at most) and into the command's DynamoDB record
# (400 KB at most) with an ARIA snapshot of up to ARIA_MAX_CHARS: each well within its bound.
RESULT_INLINE_MAX_BYTES = 64 * 1024


class PartRef(BaseModel):
    """A large part of an answer (the whole ARIA snapshot, extracted data) kept in S3."""

    model_config = ConfigDict(frozen=True)

    key: str
    sha256: str
    bytes: int
    content_type: str


class PartLink(BaseModel):
    """A large part of an answer: a short presigned link, and its sha256 to check it by."""

    url: str
    sha256: str
    bytes: int
    content_type: str
    expires_in: int | None = Field(
        default=None,
        description="seconds the link stays valid (then S3 refuses it: read the answer or "
        "the files again for a fresh one)",
    )


class Answer(BaseModel):
    """What a session's worker answers to one command."""

    model_config = ConfigDict(frozen=True)

    id: str
    ok: bool = True
    result: dict[str, Any] = Field(default_factory=dict)
    error: dict[str, Any] | None = None
    ran: int = 0  # steps of the command that ran (the last one failed when not ok)
    observation: Observation | None = None
    screenshot_key: str | None = None
    parts: dict[str, PartRef] = Field(default_factory=dict)
    # The files the command's steps made (download, screenshot, pdf), by artifact name.
    files: dict[str, PartRef] = Field(default_factory=dict)


class SessionView(View):
    """``GET /v1/browser-sessions/{id}``."""

    session_id: str
    status: SessionStatus
    job_status: str
    closed_reason: str | None = None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    idle_timeout_s: int
    max_duration_s: int
    steps: list[dict[str, Any]] | None = Field(
        default=None, description="the steps that succeeded so far, in order"
    )
    error: dict[str, Any] | None = None
    takeover: TakeoverView | None = Field(
        default=None,
        description="the person holding the session's page: its commands wait until it is "
        "handed back (POST /v1/jobs/{id}/takeover; a session's id is its job's)",
    )


class OpenSessionView(View):
    """One of ``GET /v1/browser-sessions``: a session still open, what it cost so far."""

    session_id: str
    name: str | None = None
    status: SessionStatus
    created_at: str
    started_at: str | None = None
    last_activity_at: str | None = Field(
        default=None, description="its last command (sent), else when it started"
    )
    idle_timeout_s: int
    max_duration_s: int
    max_cost_usd: float | None = None
    cost_usd: float = Field(
        description="so far: its browser-seconds and the platform's share per job, priced "
        "in us-east-1 as GET /v1/usage prices a job"
    )


# GET /v1/browser-sessions?status=: open (starting and ready), starting or ready.
OpenStatus = Literal["open", "starting", "ready"]


class OpenSessions(View):
    """``GET /v1/browser-sessions``."""

    sessions: list[OpenSessionView]


CommandStatus = Literal["pending", "running", "done", "expired", "lost"]


class StepsAnswer(View):
    session_id: str
    command_id: str
    state: CommandStatus = Field(
        default="done", description="done, or expired: not started before its deadline"
    )
    status: SessionStatus
    ok: bool
    ran: int
    result: dict[str, Any] = Field(default_factory=dict)
    error: dict[str, Any] | None = None
    observation: Observation | None = None
    parts: dict[str, PartLink] = Field(
        default_factory=dict,
        description="what was too large to answer inline, each by a link and its sha256: "
        "`result` (the extracted data, then `{}` inline), `aria_snapshot` (the whole tree "
        "when the inline one is cut: `aria_truncated`)",
    )
    files: dict[str, PartLink] = Field(
        default_factory=dict,
        description="the files these steps made (a download, a screenshot or pdf step's), "
        "by name, each by a link and its sha256 (all of the session's: GET .../files)",
    )


class SessionFile(PartLink):
    name: str


class SessionFiles(View):
    """``GET /v1/browser-sessions/{id}/files``: the files its steps made, oldest first."""

    session_id: str
    files: list[SessionFile]


class CommandView(View):
    """A command of a session (202 of ``POST .../steps``, ``GET .../commands/{id}``)."""

    session_id: str
    command_id: str
    state: CommandStatus = Field(
        description="pending (sent, not started), running, done, expired (never ran), "
        "lost (its worker went while it ran)"
    )
    answer: StepsAnswer | None = Field(default=None, description="once done or expired")
    takeover: TakeoverView | None = Field(
        default=None,
        description="pending because a person holds the session's page: the command runs "
        "once they hand it back (or `until` passes), unless its deadline passes first",
    )


class SaveAsWorkflow(BaseModel):
    """``POST /v1/browser-sessions/{id}/save-as-workflow``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    inputs: dict[str, InputValue] = Field(
        default_factory=dict,
        max_length=200,
        description="input name -> the literal value in the steps it replaces",
    )
    description: str | None = Field(default=None, max_length=2000)

    @field_validator("inputs")
    @classmethod
    def _names(cls, inputs: dict[str, InputValue]) -> dict[str, InputValue]:
        for key, value in inputs.items():
            if not key.isidentifier():
                raise ValueError(f"input name {key!r} must be an identifier")
            if isinstance(value, str) and not value:
                raise ValueError(f"input {key!r} names an empty literal")
        return inputs


class SavedWorkflow(View):
    name: str
    version: int
    steps: int
    inputs: dict[str, InputValue]
