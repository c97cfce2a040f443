"""A person holding a running job's page (or a browser session's): the takeover lock.

The owner takes a running job over from the live view; while the lock is held, the job's
worker starts no step (a workflow's next step, a session's next command waits), and what
the person does on the live view reaches the page as input events
(``pagefleet.browsing.takeover``). The lock lives on the job's record (``takeover``), so the
worker reads it in the one small read it makes every second; every move of it is a
conditional write:

- taken when no one holds it, or its holder's time ran out, or by its holder again (a renewal);
- each input (and each renewal) pushes ``until`` to ``idle_s`` after it, conditioned on the
  takeover's id: a person who stopped acting loses it, not one who acts;
- handed back by its holder (conditioned on the id), or returned by the worker once
  ``until`` passed (conditioned on the id and the time): whoever wins writes the audit record
  and the run event, once.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.errors import JobNotRunning, TakenOver, TakeoverNotHeld


class Takeover(BaseModel):
    """Who holds the job's page and until when (on the job's record while held)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    takeover_id: str = Field(description="this takeover's id (a ULID): inputs name it")
    holder: str = Field(description="who holds it: tenant:key_id of the API key that took it")
    since: str = Field(description="when it was taken (ISO 8601)")
    until: int = Field(
        description="when it returns by itself unless the person acts (epoch seconds)"
    )
    idle_s: int = Field(description="each input or renewal pushes until this far ahead")
    seq: int = Field(default=0, description="input batches sent so far (each gets the next)")

    def active(self, now: float) -> bool:
        """Held at ``now``: up to and including its ``until`` second."""
        return self.until >= int(now)


class TakeoverView(BaseModel):
    """A takeover as the API shows it (jobs, sessions, a command that waits for it)."""

    model_config = ConfigDict(frozen=True)

    takeover_id: str
    holder: str = Field(description="tenant:key_id of the API key holding the page")
    since: str
    until: int = Field(description="when it returns by itself unless the person acts (epoch s)")
    idle_s: int

    @classmethod
    def of(cls, takeover: Takeover) -> TakeoverView:
        return cls.model_validate(takeover.model_dump(exclude={"seq"}))


def held(takeover: Takeover | None, now: float) -> Takeover | None:
    """The takeover while it lasts; None when there is none or its time ran out."""
    return takeover if takeover is not None and takeover.active(now) else None


def shown(takeover: Takeover | None, *, final: bool) -> TakeoverView | None:
    """A takeover as the views show it: while the job runs (its worker returns one whose
    ``until`` passed within a second or so; a reader can compare ``until`` meanwhile)."""
    if takeover is None or final:
        return None
    return TakeoverView.of(takeover)


class TakeoverAnswer(BaseModel):
    """``POST /v1/jobs/{id}/takeover`` and ``.../takeover/input``: the takeover held."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    takeover: TakeoverView
    renewed: bool = Field(
        default=False, description="the caller held it already: the same takeover, renewed"
    )
    seq: int | None = Field(default=None, description="input: this batch's number")


class HandBack(BaseModel):
    """``DELETE /v1/jobs/{id}/takeover``: the page is the job's again."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    handed_back: bool = Field(
        description="false: no one held it (handed back already, or returned after its idle time)"
    )
    takeover: TakeoverView | None = Field(default=None, description="the takeover that ended")


# The refusals of the lock's moves, said alike by every store.
def not_running(job_id: str, status: str) -> JobNotRunning:
    return JobNotRunning(
        f"job {job_id} is {status}: only a running job (or one waiting for a person) has a "
        "page to take over",
        status=status,
    )


def taken_over(job_id: str, held: Takeover) -> TakenOver:
    return TakenOver(
        f"{held.holder} holds job {job_id}'s page until {held.until} (epoch s): wait for it "
        "to be handed back",
        holder=held.holder,
        until=held.until,
    )


def not_held(job_id: str, takeover_id: str) -> TakeoverNotHeld:
    return TakeoverNotHeld(
        f"takeover {takeover_id} of job {job_id} is over (handed back, returned after its "
        "idle time, or the job moved on): take the page over again",
        takeover_id=takeover_id,
    )
