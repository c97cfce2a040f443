"""What a worker needs of a job before its claim, carried in the job's message.

Before the claim a worker needs four things of a job: the origin its circuit breaker is
kept for, the browser context it can open while the claim is written, the attempt of its
budget the claim makes (whether that attempt records a trace) and whether the record counts
its run events. The message carries them when it can (``JobMessage.preview``) and the
worker's look at the job is then no read; otherwise (a message sent before previews, one
deferred, a job whose options carry headers) it reads the record as before.

A preview carries no workflow, no inputs and nothing a user may keep secret: the origin, not
the URL; the options only when they open the context early (no ``{{...}}`` reference, no
proxy) and carry no headers. The record stays the truth: the run takes everything from the
claimed record, and an early context whose options differ from it is closed unused.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.targets.breakers import origin_of
from pagefleet.workflow import Goto, UseSession, iter_steps
from pagefleet.workflow.templating import references, render

# A preview bigger than this is left out (the worker reads the record): a message stays far
# inside one of SQS's 64 KiB billing chunks and its 256 KiB limit.
PREVIEW_MAX_BYTES = 4_096


class Preview(BaseModel):
    """A job as its worker sees it before the claim (built whole, never changed)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    origin: str | None = None  # its first goto's origin: the breakers' target
    options: JobOptions | None = None  # None: its context opens after the claim
    attempt: int = 1  # of its budget, the one the next claim makes (1: the first)
    secrets: bool = False  # it references secrets (no trace unless it asked for one)
    events_on_record: bool = True  # the claim reserves its first run-event numbers


def target_origin(request: JobRequest) -> str | None:
    """The origin a job is admitted on: its first goto's (None if it has no goto)."""
    for _, step in iter_steps(request.steps):
        if isinstance(step, Goto):
            try:
                url = render(step.url, request.inputs, {})
            except KeyError:
                return None  # the URL holds a secret: the worker cannot know it before claiming
            return origin_of(url)
    return None


def opens_early(request: JobRequest) -> bool:
    """Whether nothing in the job's preparation can change its context, so it opens while
    the claim is written (browser_task.run.early)."""
    options = request.options
    if options.proxy is not None or options.isolation == "tenant" or options.video:
        return False
    if (request.steps and isinstance(request.steps[0], UseSession)) or request.replay is not None:
        return False
    return next(iter(references(options.model_dump(exclude_none=True))), None) is None


def preview_of(request: JobRequest, *, attempt: int, events_on_record: bool) -> Preview:
    """The preview of a job whose next claim makes attempt ``attempt`` of its budget."""
    return Preview(
        origin=target_origin(request),
        options=request.options if opens_early(request) else None,
        attempt=attempt,
        secrets=bool(request.secret_names()),
        events_on_record=events_on_record,
    )


def carried(preview: Preview, request: JobRequest) -> Preview | None:
    """``preview`` if a message may carry it, else None (the worker reads the record): only
    for a record that counts its events, without headers (a user may put a token in one),
    and small."""
    if not preview.events_on_record or request.options.extra_headers:
        return None
    if len(preview.model_dump_json(exclude_defaults=True)) > PREVIEW_MAX_BYTES:
        return None
    return preview
