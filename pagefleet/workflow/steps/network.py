"""A step that answers the page's requests itself: route (mock or abort, for the rest of
the job). The job-wide block list is ``options.block`` (pagefleet.jobs.options)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.workflow.globs import UrlGlob
from pagefleet.workflow.headers import ResponseHeaders
from pagefleet.workflow.steps.base import StepBase

MAX_FULFILL_BODY = 1_000_000


class Fulfill(BaseModel):
    """The response a route answers with, without any request leaving the browser."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    status: int = Field(default=200, ge=100, le=599)
    # Chromium leaves a request fulfilled with a header it refuses unanswered.
    headers: ResponseHeaders = Field(default_factory=dict, max_length=50)
    body: str = Field(default="", max_length=MAX_FULFILL_BODY)


class Route(StepBase):
    """From here to the job's end, requests whose URL matches the glob are aborted or
    answered with fulfill (never for an address the egress policy refuses)."""

    action: Literal["route"] = "route"
    url: UrlGlob = Field(min_length=1, max_length=2000, description="a URL glob")
    abort: bool = False
    fulfill: Fulfill | None = None

    @model_validator(mode="after")
    def _one_answer(self) -> Route:
        if self.abort == (self.fulfill is not None):
            raise ValueError("route needs exactly one of abort: true or fulfill")
        return self
