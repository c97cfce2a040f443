"""Steps that act on the page: click, fill, type, press, select, check, uncheck, hover,
scroll, upload."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pagefleet.workflow.steps.base import SELECTOR, FrameStep


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
    key: str = Field(min_length=1, max_length=100, description="e.g. Enter, Tab, Control+A")


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


class Upload(FrameStep):
    """Set a file input to a file carried in the job's inputs (text or base64)."""

    action: Literal["upload"] = "upload"
    selector: str = SELECTOR
    input: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="name of the job input")
    filename: str = Field(min_length=1, max_length=200, pattern=r"^[^/\\]+$")
    content_type: str = Field(default="application/octet-stream", max_length=200)
    encoding: Literal["text", "base64"] = "text"
