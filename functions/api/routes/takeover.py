"""Take over a running job's page (a browser session's too: its id is its job's), send what
the person does on it, hand it back (pagefleet.browsing.takeover). Audited."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from functions.api.context import actor, documented, respond, takeovers, tenancy, tenant_id
from pagefleet import ids
from pagefleet.browsing.input_events import InputBatch
from pagefleet.jobs.takeover import HandBack, TakeoverAnswer, TakeoverView

router = Router()
JOB_ID = Annotated[str, Path(pattern=ids.JOB_ID, description="the job's (or browser session's) id")]


@router.post(
    "/jobs/<job_id>/takeover",
    summary="Take over a running job's page: its steps wait while you hold it",
    description=(
        "The owner holds the page of a running job (or one waiting for a person, or a "
        "browser session): its worker starts no further step, and a session's commands "
        "stay pending, until it is handed back (DELETE) or nothing was sent for "
        "`takeover.idle_s` seconds (then it returns by itself). Send what the person does "
        "with POST .../takeover/input. Taking it again while you hold it renews it (the "
        "same takeover). 409 `taken_over` naming the holder when another key holds it; 409 "
        "when the job is not running. Audited; a `takeover` run event."
    ),
    responses=documented({200: ("the takeover held", TakeoverAnswer)}, 404, 409, 501),
    tags=["takeover"],
)
def take_over(job_id: JOB_ID) -> Response[str]:
    from pagefleet.browsing import takeover  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

    tenant, by = tenant_id(router), actor(router)
    taken = takeover.take_over(takeovers(), tenant, job_id, by)
    if taken.new:
        details = {"takeover_id": taken.takeover.takeover_id, "until": taken.takeover.until}
        tenants.record(
            tenancy(), by, "job.taken_over", tenant_id=tenant, target=job_id, details=details
        )
    view = TakeoverView.of(taken.takeover)
    return respond(200, TakeoverAnswer(job_id=job_id, takeover=view, renewed=not taken.new))


@router.post(
    "/jobs/<job_id>/takeover/input",
    summary="Send what the person did on the taken-over page (clicks, keys, text, scrolls)",
    description=(
        "Up to 50 events, in order, with coordinates in the pixels of the live view's frame "
        "they were seen on (`frame`); the worker scales them to the page's viewport and "
        "dispatches them as Chromium input events. Each batch pushes the takeover's `until` "
        "`idle_s` further. Send one batch at a time (the next after this answers). 409 "
        "`takeover_not_held` when the takeover is over (handed back or returned) or "
        "another key's: take it over again."
    ),
    responses=documented({202: ("recorded; its worker applies it", TakeoverAnswer)}, 404, 409),
    tags=["takeover"],
)
def send_input(job_id: JOB_ID, batch: Annotated[InputBatch, Body()]) -> Response[str]:
    from pagefleet.browsing import takeover  # first call: cold start

    held = takeover.send_input(takeovers(), tenant_id(router), job_id, actor(router), batch)
    view = TakeoverView.of(held)
    return respond(202, TakeoverAnswer(job_id=job_id, takeover=view, seq=held.seq))


@router.delete(
    "/jobs/<job_id>/takeover",
    summary="Hand the page back: the job's steps go on",
    description=(
        "Ends the takeover (any key of the owning tenant may); the job's worker goes on "
        "within a second. `handed_back: false` when no one held it any more (handed back "
        "already, or returned after its idle time). Audited; a `takeover` run event."
    ),
    responses=documented({200: ("the page is the job's again", HandBack)}, 404, 409),
    tags=["takeover"],
)
def hand_back(
    job_id: JOB_ID,
    takeover_id: Annotated[
        str | None,
        Query(pattern=ids.ULID, description="the takeover to end (else the one held)"),
    ] = None,
) -> Response[str]:
    from pagefleet.browsing import takeover  # first call: cold start
    from pagefleet.tenancy import service as tenants  # first call: cold start

    tenant, by = tenant_id(router), actor(router)
    ended = takeover.hand_back(takeovers(), tenant, job_id, by, takeover_id)
    if ended is None:
        return respond(200, HandBack(job_id=job_id, handed_back=False))
    details = {"takeover_id": ended.takeover_id, "holder": ended.holder}
    tenants.record(
        tenancy(), by, "job.handed_back", tenant_id=tenant, target=job_id, details=details
    )
    return respond(200, HandBack(job_id=job_id, handed_back=True, takeover=TakeoverView.of(ended)))
