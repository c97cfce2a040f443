"""How a command reaches the worker holding its session: the port, and what it carries.

No queue per session (docs/decisions.md, 2026-12-05). Each worker process has one inbox (an
SQS queue it makes when it starts, usable before it claims any session, deleted when it
stops); a session's worker is its job's lease owner, so the API finds the inbox from the
job (``pagefleet.specs.resources.inbox_name``). What goes through an inbox is a wake-up
naming a command by its ids, never its steps: the command itself (steps, observe, deadline)
and its answer are in the command ledger, in the tenant's partition
(``pagefleet.browsing.commands``). A lost wake-up delays a command until the worker's next
look at the ledger; a duplicate meets the ledger's claim and runs nothing twice.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

# A worker's inbox keeps a wake-up this long (SQS's minimum is 60 s): one older than any
# deadline's rescan is of no use (the worker looks at the ledger itself every POLL_S).
INBOX_RETENTION_S = 300
# A received wake-up is hidden from other receives this long, unless deleted sooner: set on
# each receive (not the queue's 30 s default), far above the time its delete may wait to
# share a request with others (browser_task.run.inbox). One never deleted comes back after
# it, and meets the ledger's claim (a command taken or answered is not run again).
HIDDEN_S = 60


class Wakeup(BaseModel):
    """One message to a worker's inbox: look at this session's command, or close it; or,
    for any job the worker runs (a session is one), look at its takeover (op takeover: it
    was taken or handed back) and its input batches (op input; pagefleet.browsing.takeover)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="this delivery's id (a ULID)")
    op: Literal["command", "close", "takeover", "input"] = "command"
    tenant_id: str
    session_id: str  # the session's (or the taken-over job's) id
    command_id: str | None = None  # the ledger's record to run (op command)
    takeover_id: str | None = None  # whose input batches to read (op input)


class Delivery(BaseModel):
    """A message as received: hidden until its ``receipt`` deletes it (or ``HIDDEN_S``
    passes). ``wakeup`` None: a message that is not a wake-up (deleted, never routed)."""

    model_config = ConfigDict(frozen=True)

    wakeup: Wakeup | None
    receipt: str


class InboxInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    created_at: float  # epoch seconds


class SessionInbox(Protocol):
    def make(self, name: str) -> None:
        """Create the inbox and return once it is usable (AWS: 1 s after CreateQueue)."""

    def remove(self, name: str) -> None:
        """Delete the inbox (a missing one is not an error)."""

    def send(self, name: str, wakeup: Wakeup) -> bool:
        """Send a wake-up; False when the inbox is not there (its worker is gone, or not
        ready yet): the command waits in the ledger for its worker's next look."""

    def receive(self, name: str, *, wait_s: int, hidden_s: int = HIDDEN_S) -> list[Delivery]:
        """The next messages (at most ``SQS_BATCH_MAX``, ten), each hidden from other receives for
        ``hidden_s`` or until deleted; [] after ``wait_s`` without one. A wake-up carries
        ids only and a copy runs nothing twice (the ledger's claim), so it is handed on as
        received and deleted afterwards, off its command's path."""

    def delete(self, name: str, receipts: list[str]) -> None:
        """Delete received messages (at most ``SQS_BATCH_MAX``: one request). A receipt that
        is stale, or an inbox that is gone, is no error: a copy left runs nothing."""

    def listed(self, prefix: str) -> list[InboxInfo]:
        """Every inbox whose name starts with ``prefix`` (the sweeper's look for leftovers)."""


class InboxRegistry(Protocol):
    """Which inboxes have a live worker: each worker renews its inbox's entry while it runs
    and removes it when it stops; an inbox without a live entry is a dead worker's."""

    def renew(self, name: str, *, until: float) -> None: ...

    def drop(self, name: str) -> None: ...

    def alive(self, name: str, *, now: float) -> bool: ...
