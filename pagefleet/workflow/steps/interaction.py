"""Steps that act on the page: click, fill, type, press, select, check, uncheck, hover,
scroll, upload, drag, dialog."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from pagefleet.specs.stored import stored
from pagefleet.workflow.keys import key_problem
from pagefleet.workflow.steps.base import SELECTOR, FrameStep, StepBase
from pagefleet.workflow.templating import literal_part


class Point(BaseModel):
    """A point in an element's box, from its top-left corner, in CSS pixels."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    x: float = Field(ge=0, le=100_000)
    y: float = Field(ge=0, le=100_000)


class Click(FrameStep):
    """Click an element (waits until it is visible, stable and enabled, as Playwright does)."""

    action: Literal["click"] = "click"
    selector: str = SELECTOR
    button: Literal["left", "right", "middle"] = "left"
    click_count: int = Field(default=1, ge=1, le=3)


class Fill(FrameStep):
    """Replace an input's value at once; use type for fields that react to each key."""

    action: Literal["fill"] = "fill"
    selector: str = SELECTOR
    value: str = Field(max_length=100_000, description="May use {{inputs.x}} and {{secrets.NAME}}")


class Type(FrameStep):
    """Type text key by key (for fields that react to keystrokes)."""

    action: Literal["type"] = "type"
    selector: str = SELECTOR
    text: str = Field(max_length=10_000)
    delay_ms: int = Field(default=0, ge=0, le=1_000)


class Press(FrameStep):
    """Press a key or a chord on an element (Enter submits a form, Tab moves on)."""

    action: Literal["press"] = "press"
    selector: str = SELECTOR
    key: str = Field(
        min_length=1,
        max_length=100,
        description="e.g. Enter, Escape, KeyA, Control+A",
    )

    @field_validator("key")
    @classmethod
    def _known_key(cls, key: str, info: ValidationInfo) -> str:
        # A key that uses {{...}} is checked once filled in (jobs.models, the worker).
        if literal_part(key) == key and not stored(info):
            problem = key_problem(key)
            if problem is not None:
                raise ValueError(problem)
        return key


class Select(FrameStep):
    """Choose options of a <select> by value, visible text or index (exactly one of them)."""

    action: Literal["select"] = "select"
    selector: str = SELECTOR
    value: str | list[str] | None = None
    text: str | list[str] | None = Field(default=None, description="the option's visible label")
    index: int | list[int] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> Select:
        if sum(v is not None for v in (self.value, self.text, self.index)) != 1:
            raise ValueError("select needs exactly one of value, text or index")
        return self


class Check(FrameStep):
    """Tick a checkbox or choose a radio button; nothing happens if it already is."""

    action: Literal["check"] = "check"
    selector: str = SELECTOR


class Uncheck(FrameStep):
    """Untick a checkbox; nothing happens if it already is."""

    action: Literal["uncheck"] = "uncheck"
    selector: str = SELECTOR


class Hover(FrameStep):
    """Move the pointer over an element, for menus and tooltips that open on hover."""

    action: Literal["hover"] = "hover"
    selector: str = SELECTOR


class Scroll(FrameStep):
    """Scroll an element into view, or the page by an offset, or to the bottom."""

    action: Literal["scroll"] = "scroll"
    selector: str | None = Field(default=None, min_length=1, max_length=2000)
    x: int = Field(default=0, ge=-100_000, le=100_000)
    y: int = Field(default=0, ge=-100_000, le=100_000)
    to_bottom: bool = False

    @model_validator(mode="after")
    def _one_way(self) -> Scroll:
        ways = [self.selector is not None, bool(self.x or self.y), self.to_bottom]
        if sum(ways) != 1:
            raise ValueError("scroll needs exactly one of selector, x/y or to_bottom")
        return self


_INPUT_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_FILE_NAME = r"^[^/\\]+$"
MAX_UPLOAD_FILES = 20
# A file carried in the step itself (a browser session has no job inputs): small, as it
# travels in the command's record (DynamoDB, 400 KB an item) twice, as sent and as kept.
MAX_INLINE_FILE_CHARS = 100_000
_CONTENT = Field(
    default=None,
    min_length=1,
    max_length=MAX_INLINE_FILE_CHARS,
    description="the file, instead of input",
)


class UploadFile(BaseModel):
    """One file of an ``upload``: a job input, or ``content`` given in the step (text or
    base64), given a name and a type."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    input: str | None = Field(
        default=None, pattern=_INPUT_NAME, description="name of the job input"
    )
    content: str | None = _CONTENT
    filename: str = Field(min_length=1, max_length=200, pattern=_FILE_NAME)
    content_type: str = Field(default="application/octet-stream", max_length=200)
    encoding: Literal["text", "base64"] = "text"

    @model_validator(mode="after")
    def _one_source(self) -> UploadFile:
        if (self.input is None) == (self.content is None):
            raise ValueError("a file comes from input (a job input) or content: exactly one")
        return self


class Upload(FrameStep):
    """Set a file input to files carried in the job's inputs, or in the step (``content``,
    up to 100,000 characters: a browser session's way), as text or base64: one file
    (``input`` or ``content``, ``filename``) or several at once (``files``, for an ``<input
    multiple>``); the input's files are replaced by these, as a person choosing them would."""

    action: Literal["upload"] = "upload"
    selector: str = SELECTOR
    input: str | None = Field(
        default=None, pattern=_INPUT_NAME, description="name of the job input (one file)"
    )
    content: str | None = _CONTENT
    filename: str | None = Field(default=None, min_length=1, max_length=200, pattern=_FILE_NAME)
    content_type: str = Field(default="application/octet-stream", max_length=200)
    encoding: Literal["text", "base64"] = "text"
    files: list[UploadFile] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_UPLOAD_FILES,
        description="several files in one upload (the input must accept multiple)",
    )

    @model_validator(mode="after")
    def _one_or_several(self) -> Upload:
        one = self.input is not None or self.content is not None
        if self.files is not None:
            if one or self.filename is not None:
                raise ValueError("upload takes input (or content) and filename, or files: not both")
        elif self.input is not None and self.content is not None:
            raise ValueError("upload takes input (a job input) or content (the file): not both")
        elif self.filename is None or not one:
            raise ValueError(
                "upload needs input and filename (one file; content instead of input carries "
                "the file in the step) or files (several)"
            )
        return self

    def uploads(self) -> list[UploadFile]:
        """The files this step sets, one or several."""
        if self.files is not None:
            return list(self.files)
        assert self.filename is not None
        return [
            UploadFile(
                input=self.input,
                content=self.content,
                filename=self.filename,
                content_type=self.content_type,
                encoding=self.encoding,
            )
        ]


class Drag(FrameStep):
    """Drag an element onto another: the mouse presses on ``selector``, moves to
    ``target`` and releases (Playwright's drag_to), which also fires the HTML5 drag events
    (dragstart, dragover, drop) a page listening for them needs."""

    action: Literal["drag"] = "drag"
    selector: str = SELECTOR
    target: str = Field(
        min_length=1, max_length=2000, description="selector of the element dropped onto"
    )
    # Where on each element the pointer presses and lets go (default: their centres).
    source_position: Point | None = None
    target_position: Point | None = None
    steps: int = Field(default=5, ge=1, le=100, description="mouse moves between press and release")


class Dialog(StepBase):
    """Expect the next dialog (alert, confirm, prompt, beforeunload) and answer it.

    Put it before the step that opens the dialog (a click on "Delete"): the page waits in
    the dialog until it is answered, so the answer is given as it opens. The run fails
    when the dialog's message lacks ``message_contains``, or when no dialog came by the end
    of the steps.
    """

    action: Literal["dialog"] = "dialog"
    accept: bool = Field(default=True, description="accept (OK) or dismiss (Cancel) it")
    prompt_text: str | None = Field(
        default=None, max_length=10_000, description="what an accepted prompt() returns"
    )
    message_contains: str | None = Field(
        default=None, min_length=1, max_length=2000, description="the dialog's message has this"
    )
    type: Literal["alert", "confirm", "prompt", "beforeunload"] | None = Field(
        default=None, description="the kind of dialog expected (any when omitted)"
    )
