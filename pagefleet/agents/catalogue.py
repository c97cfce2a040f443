"""The agent's tools: each one's arguments (a model: the one source of its input schema and of
the check its arguments pass before anything is sent), its description, its limits.

A description says when to use the tool, what it answers and what to do when it fails, for
a model that reads it once. The input schemas are compact (``pagefleet.agents.schemas``):
``run_step`` carries the step language once; ``submit_job`` refers to it.
"""

from __future__ import annotations

import functools
import mimetypes
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from pagefleet import ids
from pagefleet.agents.schemas import compact, step_defs
from pagefleet.browsing.models import (
    ARIA_MAX_CHARS,
    MAX_STEPS_PER_CALL,
    OpenSession,
    OpenStatus,
    SaveAsWorkflow,
)
from pagefleet.jobs.submission import JobSubmission
from pagefleet.workflow import Step
from pagefleet.workflow.steps.control import (
    DEFAULT_HUMAN_WAIT_S,
    MAX_HUMAN_WAIT_S,
    PROMPT_MAX_CHARS,
)
from pagefleet.workflow.steps.interaction import MAX_INLINE_FILE_CHARS

# A file get_file answers inline: text up to this many bytes, an image up to IMAGE_MAX_BYTES.
TEXT_INLINE_MAX_BYTES = 20_000
IMAGE_MAX_BYTES = 2_000_000
# The longest a get_job call waits for a job to end before answering with it as it is.
MAX_JOB_WAIT_S = 120
# submit_job's steps are checked whole by the server, against the one step definition that
# run_step's schema carries; said here instead of a second copy of it.
LOOSE_STEP = {
    "type": "object",
    "required": ["action"],
    "description": "a step, as run_step's `step` (same actions and fields)",
}


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SessionArgs(Args):
    session_id: str = Field(
        pattern=ids.BROWSER_SESSION_ID, description="the session's id (open_session's)"
    )


class ObserveArgs(SessionArgs):
    screenshot: bool = Field(default=False, description="also answer with a screenshot")
    scope: str | None = Field(
        default=None, min_length=1, description="a selector: the snapshot of its first match"
    )
    max_chars: int | None = Field(
        default=None, ge=100, le=ARIA_MAX_CHARS, description="cut the snapshot at this length"
    )
    diff: bool = Field(
        default=False, description="only the snapshot's lines changed since the last observe"
    )

    def aria(self) -> bool | dict[str, Any]:
        view = {"scope": self.scope, "max_chars": self.max_chars, "diff": self.diff or None}
        given = {k: v for k, v in view.items() if v is not None}
        return given or True


class RunStepArgs(ObserveArgs):
    step: Step | None = Field(default=None, description="one step")
    steps: list[Step] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_STEPS_PER_CALL,
        validate_default=True,
        description=f"steps run in order (1 to {MAX_STEPS_PER_CALL}); give this or `step`",
    )

    @field_validator("steps")
    @classmethod
    def _one_of_step_or_steps(cls, steps: list[Step] | None, info: ValidationInfo) -> Any:
        # Named `steps` (a model check would name no field): both given used to drop one.
        if "step" in info.data and (info.data["step"] is None) == (steps is None):
            also = ", not both" if steps is not None else ""
            raise ValueError(f"give `step` (one step) or `steps` (a list){also}")
        return steps


class UploadArgs(SessionArgs):
    selector: str = Field(min_length=1, max_length=2000, description="the file input")
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^/\\]+$", description="file name")
    content: str = Field(
        min_length=1, max_length=MAX_INLINE_FILE_CHARS, description="the file: text or base64"
    )
    encoding: Literal["text", "base64"] = "text"
    content_type: str | None = Field(default=None, max_length=200, description="default: by name")

    def step(self) -> dict[str, Any]:
        kind = self.content_type or mimetypes.guess_type(self.name)[0]
        given = {
            "action": "upload",
            "selector": self.selector,
            "filename": self.name,
            "content": self.content,
            "encoding": self.encoding,
            "content_type": kind,
        }
        return {k: v for k, v in given.items() if v is not None}


class GetFileArgs(SessionArgs):
    name: str | None = Field(default=None, min_length=1, max_length=200, description="omit: all")


class AwaitHumanArgs(SessionArgs):
    prompt: str = Field(min_length=1, max_length=PROMPT_MAX_CHARS)
    timeout_s: int = Field(default=DEFAULT_HUMAN_WAIT_S, ge=1, le=MAX_HUMAN_WAIT_S)
    # A still-waiting answer's: the same ask waited on again, never a second one.
    command_id: str | None = Field(default=None, pattern=ids.COMMAND_ID)

    def step(self) -> dict[str, Any]:
        return {"action": "await_human", "prompt": self.prompt, "timeout_s": self.timeout_s}


class SaveArgs(SessionArgs, SaveAsWorkflow):
    pass


class ListSessionsArgs(Args):
    status: OpenStatus = Field(default="open", description="open: starting and ready")


class GetJobArgs(Args):
    job_id: str = Field(pattern=ids.JOB_ID)
    wait_s: int = Field(
        default=0, ge=0, le=MAX_JOB_WAIT_S, description="wait this long for the job to end"
    )


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[BaseModel]
    # Whether the schema carries the step language (run_step) or refers to it (submit_job).
    carries_steps: bool = False

    @functools.cached_property
    def input_schema(self) -> dict[str, Any]:
        full = self.arguments.model_json_schema(ref_template="#/$defs/{model}")
        defs = full.pop("$defs", {})
        full.pop("description", None)  # the model's docstring: the tool's description says it
        if self.carries_steps:
            return {**compact(full, defs), "$defs": step_defs()}
        return dict(compact(full, defs, step_ref=LOOSE_STEP, depth=0))


_ERRORS = " A refusal names the argument (`field`) and says what to do next (`next`)."

TOOLS = (
    ToolSpec(
        "open_session",
        "Open a real browser (Chromium) session and get its `session_id`; it takes one of "
        "your running slots until close_session, `idle_timeout_s` without a step, or "
        "`max_duration_s`. `use_session` opens it logged in with a saved login session. "
        "Then call run_step." + _ERRORS,
        OpenSession,
    ),
    ToolSpec(
        "run_step",
        "Run one step (`step`) or up to 20 in order (`steps`) in the session's browser. Each "
        'step is an object with an `action`: e.g. {"action": "goto", "url": ...}, '
        '{"action": "click", "selector": ...}, {"action": "fill", "selector": ..., '
        '"value": ...}, {"action": "extract", "name": ..., "selector": ...}. Selectors are '
        'Playwright selectors (CSS, text=..., role=button[name="Send"]) or `aria-ref=REF`, '
        "a ref of the last observation's snapshot (iframes' elements too; kept as a lasting "
        'selector when saved). Go back: {"action": "back"} (forward too); another tab: '
        '{"action": "switch_tab", "index": N}; a dialog: a dialog step (accept, '
        "prompt_text) before the step that opens it (unexpected ones are dismissed; the "
        "observation's `dialogs` says what each said). Answers `ok`, `ran` (how many ran: "
        "the one after them failed, with `error`), `result` (what extract read) and `observation` "
        "(URL, title, ARIA snapshot of the page after them). A failed step is an error "
        "result: read its observation, fix the step, run it again." + _ERRORS,
        RunStepArgs,
        carries_steps=True,
    ),
    ToolSpec(
        "observe",
        "The session's page as it is now: URL, title and ARIA snapshot (cut at `max_chars`, "
        "20,000 at most, and `aria_truncated` says so); `scope` (a selector) snapshots only "
        "that part, `diff` answers only the lines changed since the last observation (+ "
        "added, - removed). With `screenshot`, an image of it too. Use it before choosing a "
        "selector, or after a step that failed; run_step takes the same. The snapshot "
        "shows iframes' content and each element's [ref=REF]; `tabs` lists the tabs once "
        "a popup or new tab opened (steps act on the `current` one).",
        ObserveArgs,
    ),
    ToolSpec(
        "upload_file",
        "Set a file input (`selector`, e.g. input[type=file]) to a file you give: its "
        f"`name` and `content` (text, or base64 with `encoding`; {MAX_INLINE_FILE_CHARS:,} "
        "characters at most). Answers as run_step (save_as_workflow keeps the step).",
        UploadArgs,
    ),
    ToolSpec(
        "get_file",
        "A file the session's steps made (download, screenshot, pdf step): its `url` (a "
        f"short link), its text (`content`) up to {TEXT_INLINE_MAX_BYTES:,} bytes, an image "
        "you can see. Without `name`: the list of them.",
        GetFileArgs,
    ),
    ToolSpec(
        "await_human",
        "Ask a person to act in the session's browser (a CAPTCHA, a code, a judgement): "
        "`prompt` says what. Returns once they continue (their note: `result.human_note`), "
        "or fails after `timeout_s`. `state: waiting_for_human`: not yet; call again with "
        "its `command_id`.",
        AwaitHumanArgs,
    ),
    ToolSpec(
        "list_sessions",
        "Your sessions still open (`status`: open, starting or ready), newest first: each "
        "one's `session_id`, last activity and cost so far: find one again, or one left "
        "open to close.",
        ListSessionsArgs,
    ),
    ToolSpec(
        "close_session",
        "Close the session: its browser goes, its slot is freed; its successful steps stay "
        "savable (save_as_workflow).",
        SessionArgs,
    ),
    ToolSpec(
        "save_as_workflow",
        "Save the session's successful steps (open or closed) as the next version of the "
        "workflow `name`. `inputs` maps an input name to a literal value the steps used "
        '(e.g. {"who": "Grace Hopper"}): it becomes {{inputs.who}}, a parameter of the '
        "workflow. Run it with submit_job.",
        SaveArgs,
    ),
    ToolSpec(
        "submit_job",
        "Run a workflow as a job, without you: `workflow` (NAME or NAME@VERSION) with its "
        "`inputs`, or inline `steps` (each as run_step's `step`). Answers the job's "
        "`job_id` at once; get_job waits for its end and its result. Nested objects are "
        "checked by the server, which names a wrong field." + _ERRORS,
        JobSubmission,
    ),
    ToolSpec(
        "get_job",
        "A job's status, and once it ended its `result` and artifact links; `wait_s` (up "
        f"to {MAX_JOB_WAIT_S}) waits for it to end first.",
        GetJobArgs,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}
