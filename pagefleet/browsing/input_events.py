"""What a person does on a taken-over page: input events, as the API takes them and the
worker replays them (Chromium's ``Input`` domain over CDP).

The console (or any client) sends batches of events seen on the live view's frames:
coordinates in the frame's pixels, with the frame's size, which the worker scales to the
page's viewport. A batch is recorded, numbered by the takeover (``seq``), in the tenant's
partition of the command ledger before its wake-up is sent (ids only): the worker reads the
batches of its takeover in order, as the job's tenant (pagefleet.browsing.inbox).
"""

from __future__ import annotations

from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet import ids

# Bounds of one batch: a person's second or two of typing and clicking.
MAX_EVENTS = 50
MAX_TEXT_CHARS = 2000
MAX_FRAME_PX = 4096
MAX_SCROLL_PX = 10_000
# A batch is kept this long: its worker reads it within a second or two, or never.
INPUT_RETENTION_S = 3600

Modifier = Literal["Alt", "Control", "Meta", "Shift"]
# CDP's Input.dispatch*Event ``modifiers`` bit field.
MODIFIER_BITS: dict[str, int] = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    modifiers: list[Modifier] = Field(default_factory=list, max_length=4)


class _Pointed(_Event):
    x: float = Field(ge=0, le=MAX_FRAME_PX, description="in the frame's pixels")
    y: float = Field(ge=0, le=MAX_FRAME_PX, description="in the frame's pixels")


Button = Literal["left", "middle", "right"]


class ClickInput(_Pointed):
    """A whole click (press and release), for a client that sends gestures."""

    type: Literal["click"]
    button: Button = "left"
    count: int = Field(
        default=1,
        ge=1,
        le=3,
        description="2: a double click (two presses, the second one's clickCount 2)",
    )


class MoveInput(_Pointed):
    """The pointer moved here (hover menus, tooltips; a drag while ``buttons`` are held)."""

    type: Literal["move"]
    buttons: list[Button] = Field(default_factory=list, max_length=3, description="held down")


class PressInput(_Pointed):
    """A button went down (``down``) or up (``up``), as the console sees them: a person's
    double click is down/up with count 1, then down/up with count 2 (the DOM's ``detail``),
    which the page gets as a real double click (a ``dblclick`` event)."""

    type: Literal["down", "up"]
    button: Button = "left"
    count: int = Field(
        default=1,
        ge=1,
        le=3,
        description="the press's clickCount (2: the second of a double click)",
    )


class ScrollInput(_Pointed):
    type: Literal["scroll"]
    dx: float = Field(default=0, ge=-MAX_SCROLL_PX, le=MAX_SCROLL_PX)
    dy: float = Field(default=0, ge=-MAX_SCROLL_PX, le=MAX_SCROLL_PX)


class KeyInput(_Event):
    type: Literal["key"]
    key: str = Field(
        min_length=1,
        max_length=32,
        description="a KeyboardEvent.key value: Enter, Tab, Backspace, ArrowDown, a, ...",
    )


class TextInput(_Event):
    type: Literal["text"]
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="typed as is")


AnyInput = ClickInput | MoveInput | PressInput | ScrollInput | KeyInput | TextInput
InputEvent = Annotated[AnyInput, Field(discriminator="type")]


class FrameSize(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    width: int = Field(ge=1, le=MAX_FRAME_PX)
    height: int = Field(ge=1, le=MAX_FRAME_PX)


class InputBatch(BaseModel):
    """``POST /v1/jobs/{id}/takeover/input``: what the person did, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    takeover_id: str = Field(pattern=ids.ULID, description="the takeover the events belong to")
    frame: FrameSize = Field(description="the size of the frame the events were seen on")
    events: list[InputEvent] = Field(min_length=1, max_length=MAX_EVENTS)

    @model_validator(mode="after")
    def _on_the_frame(self) -> InputBatch:
        for index, event in enumerate(self.events):
            if isinstance(event, _Pointed) and (
                event.x > self.frame.width or event.y > self.frame.height
            ):
                raise ValueError(
                    f"events[{index}] is outside the frame ({self.frame.width}x"
                    f"{self.frame.height}): coordinates are in the frame's pixels"
                )
        return self


class InputRecord(BaseModel):
    """One batch as the ledger keeps it, numbered within its takeover."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    job_id: str
    takeover_id: str
    seq: int = Field(ge=1)
    frame: FrameSize
    events: list[InputEvent]
    expires_at: int


class TakeoverInputs(Protocol):
    """Input batches in the tenant's partition of the command ledger."""

    def put(self, record: InputRecord) -> None:
        """Keep the batch (the same seq again: harmless)."""

    def after(
        self, tenant_id: str, job_id: str, takeover_id: str, *, seq: int, limit: int = 20
    ) -> list[InputRecord]:
        """The takeover's batches numbered above ``seq``, in order, at most ``limit``."""
