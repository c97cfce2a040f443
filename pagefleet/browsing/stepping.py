"""A browser session's steps as the API sends them: recorded as a command, its worker woken,
the record read while the command runs, for at most ``wait_s``.

Each command is recorded, body and all, in the session's command ledger before anything is
sent (pagefleet.browsing.commands: run once or answered ``expired``); its worker is woken
through its inbox (pagefleet.browsing.inbox: ids only) and answers in the record. A call
answers 202 with the command's id as soon as the command is not running: a session still
starting, or a worker busy with another command, holds no API execution (docs/api.md,
"Browser sessions").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from pagefleet.background import Background
from pagefleet.browsing.answer_times import SHORT_PAUSE_S, SHORT_READS, kind_of
from pagefleet.browsing.answers import answered
from pagefleet.browsing.commands import (
    CommandBody,
    CommandRecord,
    CommandState,
    fingerprint,
)
from pagefleet.browsing.inbox import Wakeup
from pagefleet.browsing.models import (
    CommandStatus,
    CommandView,
    StepsAnswer,
    StepsRequest,
)
from pagefleet.browsing.service import Sessions, get_session
from pagefleet.browsing.status import refuse_ended, status_of
from pagefleet.errors import (
    IdempotencyKeyReused,
    InvalidField,
    NotFound,
)
from pagefleet.jobs.models import JobRequest, iso, new_ulid
from pagefleet.jobs.takeover import shown
from pagefleet.workflow import Step, UseSession

log = logging.getLogger("pagefleet.browsing")

# A session's commands (and so its steps) are kept this long: save-as-workflow after it ended.
COMMAND_RETENTION_S = 30 * 24 * 3600
# A command its worker has not taken this long after it was sent is not waited for: the
# worker is busy with another command (or gone), and the call answers 202 at once.
CLAIM_GRACE_S = 1.0
# How often a call reads the record while it waits: every FIRST_READ_S at first (most steps
# take tens of milliseconds: an answer is seen within a few ms of its record), then an eighth
# of the time waited so far (a long step costs a read per 1/8 of its time at most), at most
# LAST_READ_S apart. A doubling schedule saw a 50 ms step's answer ~20 ms late.
FIRST_READ_S = 0.005
READ_SHARE = 1 / 8
LAST_READ_S = 0.05
# No answer is in the record sooner than this many of the record's own round trips after the
# record was written: the worker's claim is a write to the same table once the wake-up (sent
# alongside the record) has come, and the step and its answer's write follow. The first read
# waits that long (between FIRST_READ_S and LAST_READ_S): a read before it cannot find the
# answer, and on the local stack it holds up the embedded AWS the claim and the answer wait
# for. One trip, not two: the record's own trip is the longer one under load (it shares the
# moment with the wake-up's send), and a first read too late is worse than one too early.
ANSWER_TRIPS = 1


def check_steps(request: JobRequest, steps: list[Step]) -> list[dict[str, Any]]:
    """A job's checks on the steps (references, blocks, sizes): 422 naming the field."""
    dumped = [s.model_dump(mode="json", exclude_unset=True, exclude_none=True) for s in steps]
    if not dumped:
        return dumped  # an observation alone
    try:
        # The session's options as they are: checked when it opened.
        JobRequest.model_validate({"steps": dumped, "options": request.options})
    except ValidationError as exc:
        raise InvalidField.from_errors(exc.errors()) from None
    return dumped


def run_steps(
    sessions: Sessions,
    tenant_id: str,
    session_id: str,
    body: StepsRequest,
    *,
    command_id: str | None = None,
) -> StepsAnswer | CommandView:
    """Record the command, wake the session's worker and read the record while the command
    runs, up to ``wait_s``: the answer, or (not answered yet) the command as it stands, for
    a 202. A command id already recorded is answered from its record, never run again."""
    inbox = sessions.require_inbox()
    ledger = sessions.require_commands()
    opened = sessions.opened(tenant_id, session_id, known=True)
    steps = body.all_steps()
    if any(isinstance(s, UseSession) for s in steps):
        raise InvalidField(
            "use_session applies when a session opens (POST /v1/browser-sessions use_session)",
            field="step",
        )
    dumped = check_steps(opened.request, steps)
    if command_id is not None and body.command_id is not None and command_id != body.command_id:
        raise InvalidField(
            "the Idempotency-Key header and command_id differ; give one, or the same",
            field="command_id",
        )
    now = sessions.jobs.lifecycle.now()
    given = command_id or body.command_id or new_ulid()
    wanted = CommandRecord(
        tenant_id=tenant_id,
        session_id=session_id,
        command_id=given,
        fingerprint=fingerprint({"steps": dumped, "observe": body.observe.model_dump()}),
        deadline=now + body.deadline_s,
        created_at=iso(datetime.fromtimestamp(now, UTC)),  # the lifecycle's clock
        expires_at=int(now) + COMMAND_RETENTION_S,
        body=CommandBody(steps=dumped, observe=body.observe),
    )
    wakeup = Wakeup(id=new_ulid(), tenant_id=tenant_id, session_id=session_id, command_id=given)
    # The worker holding the session known: it is woken while the record is written, not
    # after (one round trip less on each step's path). Its claim waits a moment for a record
    # on its way (browser_task.run.session_loop, RECORD_WAITS_S); a wake-up for a command
    # that is not to run (answered already, or refused below) meets the claim and runs none.
    early = Background(inbox.send, opened.inbox, wakeup) if opened.inbox is not None else None
    began = sessions.clock()
    record = ledger.record(wanted)
    trip = sessions.clock() - began
    woke = early.result() if early is not None else None
    if record.fingerprint != wanted.fingerprint:
        raise IdempotencyKeyReused(
            f"command {given} was sent with other steps; use a new command_id for these",
            field="command_id",
        )
    if record.state in (CommandState.DONE, CommandState.EXPIRED):
        return answered(sessions.presign, record, "ready", ttl_s=sessions.presign_ttl_s)
    if woke is None:
        # Read after the record was written: a worker that took the session since either
        # is seen here, or finds the command when it looks at the ledger as it starts.
        opened = sessions.opened(tenant_id, session_id)
        if opened.inbox is not None and record.state is CommandState.PENDING:
            # New, or a retry whose first wake-up may never have arrived: woken (again). The
            # worker's claim on the record runs it once whatever number of wake-ups reach it.
            woke = inbox.send(opened.inbox, wakeup)
    if woke is False:
        # Its worker's inbox is gone (the worker died, or is named otherwise): the command
        # waits for the worker's own look at the ledger, or for the sweeper.
        log.warning(
            "the inbox of browser session %s's worker is gone: %s", session_id, opened.inbox
        )
    woken = bool(woke)
    if woken or record.state is CommandState.RUNNING:
        record = _await_answer(sessions, record, body, dumped, began=began, trip=trip)
    if record.state is CommandState.DONE and record.answer is not None:
        return answered(sessions.presign, record, "ready", ttl_s=sessions.presign_ttl_s)
    view = read_command(sessions, tenant_id, session_id, given)
    if view.state == "done" and view.answer is not None:
        return view.answer
    job = get_session(sessions, tenant_id, session_id)
    if job.status.is_final or job.cancel_requested_at is not None:
        sessions.forget(tenant_id, session_id)
        refuse_ended(job)
    return view.answer or view


def _await_answer(
    sessions: Sessions,
    record: CommandRecord,
    body: StepsRequest,
    dumped: list[dict[str, Any]],
    *,
    began: float,
    trip: float,
) -> CommandRecord:
    """Read the record while its command runs (``began``: when the record was sent, ``trip``:
    its round trip): first when answers of its kind came lately (``answer_times``), else once
    the worker could have written the answer (``ANSWER_TRIPS``)."""
    observe = body.observe.model_dump(mode="json")
    kind = kind_of(record.tenant_id, record.session_id, dumped, observe)
    learned = sessions.answer_times.first_read_s(kind)
    first = ANSWER_TRIPS * trip
    if learned is not None:  # counted from before the record was sent, as it was learned
        first = max(first, learned - (sessions.clock() - began))
    return await_record(
        sessions,
        record,
        min(float(body.wait_s), sessions.max_wait_s),
        first_read_s=first,
        learned=learned is not None,
        on_found=lambda at, reads: sessions.answer_times.found(kind, at - began, reads),
    )


def await_record(
    sessions: Sessions,
    record: CommandRecord,
    wait_s: float,
    *,
    first_read_s: float = 0.0,
    learned: bool = False,
    on_found: Callable[[float, int], None] | None = None,
) -> CommandRecord:
    """The command's record once answered, or as it stands when waiting is over: after
    ``wait_s``, or at once when its worker has not taken it ``CLAIM_GRACE_S`` after it was
    sent. A call is held while the steps run, never while they wait (finding 8 of issue 32:
    no API execution waits for a browser that is starting, busy or gone). ``first_read_s``:
    when the answer could first be there (``ANSWER_TRIPS``), kept between FIRST_READ_S and
    LAST_READ_S; ``learned``: it is when answers of its kind came lately (answer_times), kept
    as it is and followed by a few close reads. ``on_found``: told when (the clock's time)
    the read that found the answer was sent, and how many reads it took."""
    ledger = sessions.require_commands()
    begin = sessions.clock()
    first = max(FIRST_READ_S, first_read_s)
    if not learned:
        first = min(LAST_READ_S, first)
    short = SHORT_READS if learned else 0
    reads = 0
    while True:
        waited = sessions.clock() - begin
        if record.state in (CommandState.DONE, CommandState.EXPIRED) or waited >= wait_s:
            return record
        if record.state is CommandState.PENDING and waited >= CLAIM_GRACE_S:
            return record
        pause = min(LAST_READ_S, max(FIRST_READ_S, waited * READ_SHARE))
        if first:
            pause, first = first, 0.0
        elif short:
            pause, short = SHORT_PAUSE_S, short - 1
        sessions.sleep(min(pause, wait_s - waited))
        sent = sessions.clock()
        found = ledger.get(record.tenant_id, record.session_id, record.command_id)
        reads += 1
        record = found or record
        if on_found is not None and record.state is CommandState.DONE:
            on_found(sent, reads)


def read_command(
    sessions: Sessions,
    tenant_id: str,
    session_id: str,
    command_id: str,
    *,
    wait_s: float = 0.0,
) -> CommandView:
    """A command as it stands: pending, running, or its answer (done, expired); one whose
    deadline passed unstarted, or whose session ended before it started, is expired here.
    ``wait_s``: a command found running is read until its answer, for at most that long,
    as the call that sent it would have been (a pending one is answered at once: the call
    holds for the step's own time, never for a browser starting or busy)."""
    ledger = sessions.require_commands()
    job = get_session(sessions, tenant_id, session_id)
    record = ledger.get(tenant_id, session_id, command_id)
    if record is None:
        raise NotFound(f"command {command_id} of browser session {session_id} not found")
    if wait_s > 0 and record.state is CommandState.RUNNING and not job.status.is_final:
        record = await_record(sessions, record, min(wait_s, sessions.max_wait_s))
    status, _ = status_of(job)
    past = sessions.jobs.lifecycle.now() >= record.deadline
    if record.state is CommandState.PENDING and (past or job.status.is_final):
        record = ledger.expire(tenant_id, session_id, command_id) or record
    state: CommandStatus = record.state.value
    if record.state is CommandState.RUNNING and job.status.is_final:
        state = "lost"  # its worker went while it ran: whether its steps ran is unknown
    answer = None
    if record.state in (CommandState.DONE, CommandState.EXPIRED):
        answer = answered(sessions.presign, record, status, ttl_s=sessions.presign_ttl_s)
    # A pending command says so plainly when it waits for the person holding the page.
    takeover = shown(job.takeover, final=job.status.is_final) if state == "pending" else None
    return CommandView(
        session_id=session_id,
        command_id=command_id,
        state=state,
        answer=answer,
        takeover=takeover,
    )
