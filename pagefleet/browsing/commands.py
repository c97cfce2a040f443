"""A session's commands, each run exactly once or answered ``expired``: the ledger's rules.

Every command a caller sends is recorded before it is sent (``pending``), with its id (the
caller's ``command_id`` / ``Idempotency-Key``, or one made up), a fingerprint of its body
and a deadline. The worker runs a command only after its conditional claim
(``pending -> running`` while the deadline is ahead) wins; a duplicate delivery, or a retry
sent again, finds it taken and is answered from the record. A command whose deadline passed
before it was claimed is moved ``pending -> expired`` (by the worker, or by a reader once
the session ended) and never runs. The worker records the answer and the steps that
succeeded (``running -> done``) before it sends the answer: the record, not the answer
queue, is what a caller's retry, ``GET .../commands/{id}`` and the session's step history
read. A command found ``running`` in a session that ended is reported ``lost`` (its worker
went with it; whether its steps ran is unknown). A claim that found a person holding the
page once it was made (its worker reads the takeover lock alongside the claim, not before
it: one round trip less on every command) is put back ``running -> pending`` by that claim's
worker before any step ran (``release``, conditioned on the claim's ``order``).
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.browsing.models import Answer, Observe


class CommandState(StrEnum):
    PENDING = "pending"  # recorded, not yet taken by the worker
    RUNNING = "running"  # taken by the worker: it will not be taken again
    DONE = "done"  # answered; the answer is in the record
    EXPIRED = "expired"  # its deadline passed before the worker took it: it never ran


# The only moves a record makes (each a conditional write on the state before it).
TRANSITIONS: dict[CommandState, frozenset[CommandState]] = {
    CommandState.PENDING: frozenset({CommandState.RUNNING, CommandState.EXPIRED}),
    # Back to pending: its own claim, given back before any step ran (a person holds the page).
    CommandState.RUNNING: frozenset({CommandState.DONE, CommandState.PENDING}),
    CommandState.DONE: frozenset(),
    CommandState.EXPIRED: frozenset(),
}


class CommandBody(BaseModel):
    """What a command asks of the worker: kept in the record, never in a queue message (an
    inbox carries ids only: pagefleet.browsing.inbox)."""

    model_config = ConfigDict(frozen=True)

    steps: list[dict[str, Any]] = Field(default_factory=list)
    observe: Observe = Field(default_factory=Observe)


class CommandRecord(BaseModel):
    """One command of a session as the ledger keeps it (built whole, never changed)."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    session_id: str
    command_id: str
    state: CommandState = CommandState.PENDING
    fingerprint: str
    deadline: float = Field(description="epoch seconds: not started after this")
    created_at: str
    expires_at: int = Field(description="epoch seconds: the record's TTL")
    body: CommandBody = Field(default_factory=CommandBody)
    # Set when taken: orders the session's steps (a ULID made at the claim).
    order: str | None = None
    answer: Answer | None = None
    # The steps of this command that succeeded, as the session's history keeps them.
    steps: list[dict[str, Any]] = Field(default_factory=list)


EXPIRED_KIND = "expired"


def expired_answer(delivery_id: str) -> Answer:
    """What a command not started before its deadline is answered: it never ran."""
    error = {
        "kind": EXPIRED_KIND,
        "message": "the steps were not started before their deadline (deadline_s) and never "
        "ran; send them again (with a new command_id) if they are still wanted",
    }
    return Answer(id=delivery_id, ok=False, error=error)


def fingerprint(body: Any) -> str:
    """What a command asks for, hashed: a reused id with another body is refused."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Claim(BaseModel):
    """What the worker does with a command it received: ``run`` it (the claim won),
    answer it from the record (``answered``: done or expired already), or drop it
    (``unknown``: no record, or another delivery is running it)."""

    model_config = ConfigDict(frozen=True)

    verdict: str  # run | answered | unknown
    record: CommandRecord | None = None


class CommandLedger(Protocol):
    def record(self, command: CommandRecord) -> CommandRecord:
        """Record a new command; the one already recorded under its id when there is one."""

    def get(self, tenant_id: str, session_id: str, command_id: str) -> CommandRecord | None: ...

    def claim(
        self, tenant_id: str, session_id: str, command_id: str, *, now: float, order: str
    ) -> Claim:
        """Take a pending command to run (once), or expire it if its deadline passed."""

    def expire(self, tenant_id: str, session_id: str, command_id: str) -> CommandRecord | None:
        """``pending -> expired`` (a session that ended will not run it); the record after."""

    def release(self, tenant_id: str, session_id: str, command_id: str, *, order: str) -> bool:
        """``running -> pending``: the claim made with ``order`` given back before any of
        its steps ran; False when the command is not held by that claim."""

    def finish(
        self,
        tenant_id: str,
        session_id: str,
        command_id: str,
        answer: Answer,
        steps: list[dict[str, Any]],
    ) -> None:
        """``running -> done`` with its answer and the steps that succeeded."""

    def session_commands(self, tenant_id: str, session_id: str) -> list[CommandRecord]:
        """Every command recorded for the session (any order)."""


def pending_commands(ledger: CommandLedger, tenant_id: str, session_id: str) -> list[CommandRecord]:
    """The session's commands not yet taken, oldest first: what its worker runs when a
    wake-up was lost, or came before the worker held the session."""
    found = [
        c for c in ledger.session_commands(tenant_id, session_id) if c.state is CommandState.PENDING
    ]
    return sorted(found, key=lambda c: (c.created_at, c.command_id))


def session_steps(ledger: CommandLedger, tenant_id: str, session_id: str) -> list[dict[str, Any]]:
    """The steps that succeeded in the session, in the order they ran: durable as each
    command was answered, whatever became of its worker since."""
    done = [
        c
        for c in ledger.session_commands(tenant_id, session_id)
        if c.state is CommandState.DONE and c.order is not None
    ]
    done.sort(key=lambda c: c.order or "")
    return [step for c in done for step in c.steps]
