"""Steps that produce artifacts: screenshot, pdf, download."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pagefleet.workflow.steps.base import ARTIFACT_NAME, SELECTOR, FrameStep, StepBase

Retention = Literal["routine", "debug"]


def png_name(name: str) -> str:
    """A screenshot's artifact name: the step's name, ``.png`` added when it lacks one."""
    return name if name.lower().endswith(".png") else f"{name}.png"


class Screenshot(FrameStep):
    """PNG of the viewport, the full page, or one element (``selector``)."""

    action: Literal["screenshot"] = "screenshot"
    name: str = ARTIFACT_NAME
    full_page: bool = False
    selector: str | None = Field(default=None, min_length=1, max_length=2000)
    retention: Retention = "routine"

    @property
    def artifact_name(self) -> str:
        return png_name(self.name)


class Pdf(StepBase):
    """The page printed as a PDF artifact (Chromium print to PDF)."""

    action: Literal["pdf"] = "pdf"
    name: str = ARTIFACT_NAME
    format: Literal["A4", "Letter", "Legal", "A3", "A5"] = "A4"
    landscape: bool = False
    print_background: bool = True
    retention: Retention = "routine"


class Download(FrameStep):
    """Click something that starts a download; keep the file as an artifact.

    The artifact takes ``name`` if given, else the file name the site suggested.
    """

    action: Literal["download"] = "download"
    selector: str = SELECTOR
    name: str | None = Field(
        default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
    )
    retention: Retention = "routine"
