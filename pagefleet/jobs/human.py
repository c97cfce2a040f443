"""A job that waits for a person (an ``await_human`` step): what the record carries while it
waits, and its bounds.

The worker parks the job (``running -> waiting_for_human``, fenced on its attempt): the
tenant's running slot goes back, the browser context stays open under the worker's lease
for at most the step's ``timeout_s``. The owner continues it through the API, which only
writes ``continued_at`` on the waiting record (conditioned on the state); the worker that
holds the attempt sees it, takes a running slot again and moves the job back to running.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

NOTE_MAX_CHARS = 2000


class HumanWait(BaseModel):
    """The question a waiting job asks, and the person's answer once given."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    prompt: str = Field(description="what the job asks the person to do")
    step_index: int = Field(description="the await_human step's top-level index")
    asked_at: str = Field(description="when the job started waiting (ISO 8601)")
    timeout_at: int = Field(description="when the wait ends unanswered (epoch seconds)")
    continued_at: str | None = Field(
        default=None, description="when the owner continued it (the worker resumes then)"
    )
    note: str | None = Field(default=None, description="the person's note, if any")


class ContinueRequest(BaseModel):
    """``POST /v1/jobs/{id}/continue``: the person is done; the job goes on."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    note: str | None = Field(
        default=None,
        max_length=NOTE_MAX_CHARS,
        description="what the person did, kept with the job and its run events",
    )
