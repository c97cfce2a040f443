"""What the API does when a person takes over a running job's page (a browser session is a
job): take it, send what they do on it, hand it back (docs/api.md, "Take over a page").

The lock is the job record's ``takeover`` (pagefleet.jobs.takeover, conditional writes);
input batches are recorded, numbered, in the tenant's partition of the command ledger
(pagefleet.browsing.input_events) before the worker holding the job is woken through its
inbox with ids only (pagefleet.browsing.inbox). Another tenant's job is no job: nothing is
written or sent. Each take and hand-back is a run event written here (the worker writes the
idle return's); the route writes the audit record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pagefleet.browsing.inbox import Wakeup
from pagefleet.browsing.input_events import (
    INPUT_RETENTION_S,
    InputBatch,
    InputRecord,
    TakeoverInputs,
)
from pagefleet.browsing.service import Sessions
from pagefleet.errors import NotConfigured, TakeoverNotHeld
from pagefleet.jobs.models import iso, new_ulid
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.takeover import Takeover, held
from pagefleet.live.events import EventType
from pagefleet.live.history import append_event
from pagefleet.live.ports import EventStore
from pagefleet.specs.resources import TAKEOVER_IDLE_S, inbox_name, owner_worker


@dataclass(frozen=True)
class Takeovers:
    sessions: Sessions  # the jobs, the workers' inboxes and their stage
    inputs: TakeoverInputs | None  # None: this deployment has no command ledger
    events: EventStore
    idle_s: int = TAKEOVER_IDLE_S

    def now(self) -> float:
        return self.sessions.jobs.lifecycle.now()

    def require_inputs(self) -> TakeoverInputs:
        if self.inputs is None or self.sessions.inbox is None:
            raise NotConfigured("takeover is not configured in this deployment")
        return self.inputs


@dataclass(frozen=True)
class Taken:
    takeover: Takeover
    new: bool  # False: the holder's own takeover, renewed


def take_over(t: Takeovers, tenant_id: str, job_id: str, holder: str) -> Taken:
    """Hold the job's page (its worker starts no step until it is handed back or returns);
    again by its holder: renewed. ``NotFound`` for another tenant's job, ``JobNotRunning``,
    ``TakenOver`` (another holder)."""
    t.require_inputs()
    now = t.now()
    proposed = Takeover(
        takeover_id=new_ulid(),
        holder=holder,
        since=iso(datetime.fromtimestamp(now, UTC)),
        until=int(now) + t.idle_s,
        idle_s=t.idle_s,
    )
    job = t.sessions.jobs.store.take_over(tenant_id, job_id, proposed, now=int(now))
    takeover = job.takeover
    assert takeover is not None
    new = takeover.takeover_id == proposed.takeover_id
    if new:
        _tell(t, job, now, state="taken", holder=holder, until=takeover.until)
    _wake(t, job, "takeover", takeover.takeover_id)  # its worker holds its steps at once
    return Taken(takeover, new)


def send_input(
    t: Takeovers, tenant_id: str, job_id: str, holder: str, batch: InputBatch
) -> Takeover:
    """Record what the person did (the next number of their takeover), pushing its ``until``,
    and wake the worker. ``TakeoverNotHeld`` when the takeover is over or another's."""
    inputs = t.require_inputs()
    now = t.now()
    takeover = t.sessions.jobs.store.touch_takeover(
        tenant_id,
        job_id,
        batch.takeover_id,
        holder=holder,
        until=int(now) + t.idle_s,
        now=int(now),
        count_input=True,
    )
    inputs.put(
        InputRecord(
            tenant_id=tenant_id,
            job_id=job_id,
            takeover_id=batch.takeover_id,
            seq=takeover.seq,
            frame=batch.frame,
            events=batch.events,
            expires_at=int(now) + INPUT_RETENTION_S,
        )
    )
    job = t.sessions.jobs.store.get(tenant_id, job_id, consistent=False)
    _wake(t, job, "input", batch.takeover_id)
    return takeover


def hand_back(
    t: Takeovers, tenant_id: str, job_id: str, holder: str, takeover_id: str | None
) -> Takeover | None:
    """Give the page back (the job's steps go on): the takeover removed, or None when none
    was held (handed back already, or returned after its idle time). Any key of the owning
    tenant may hand it back; ``takeover_id``, when given, must be the one held."""
    now = t.now()
    job = t.sessions.jobs.store.get(tenant_id, job_id)  # NotFound for another tenant's
    current = held(job.takeover, now)
    if current is None:
        return None
    if takeover_id is not None and takeover_id != current.takeover_id:
        raise TakeoverNotHeld(
            f"takeover {takeover_id} of job {job_id} is over; {current.holder} holds "
            f"another until {current.until}",
            takeover_id=takeover_id,
        )
    released = t.sessions.jobs.store.release_takeover(tenant_id, job_id, current.takeover_id)
    if released is None:
        return None  # handed back or returned meanwhile: that move told everyone
    _tell(t, job, now, state="handed_back", holder=holder)
    _wake(t, job, "takeover", released.takeover_id)  # its steps go on at once
    return released


def _wake(t: Takeovers, job: JobRecord, op: Literal["takeover", "input"], takeover_id: str) -> None:
    """Wake the job's worker (its lease owner's inbox): ids only. A lost wake-up costs a
    second: the worker reads the lock every second anyway."""
    inbox = t.sessions.inbox
    if inbox is None or not job.lease_owner:
        return
    wakeup = Wakeup(
        id=new_ulid(),
        op=op,
        tenant_id=job.tenant_id,
        session_id=job.job_id,
        takeover_id=takeover_id,
    )
    inbox.send(inbox_name(t.sessions.stage, owner_worker(job.lease_owner)), wakeup)


def _tell(t: Takeovers, job: JobRecord, now: float, **fields: Any) -> None:
    """The job's followers learn of a takeover's move: a run event numbered among its
    worker's."""
    append_event(t.sessions.jobs.store, t.events, job, EventType.TAKEOVER, at=now, **fields)
