"""What the lifecycle lets others add to its moves, without knowing who they are.

The tenant limits (``pagefleet.tenancy.gate``) take a running slot before a claim and give
it back when the job leaves ``running``; they are one ``JobHooks``. A hook never moves a
job itself: it may only ask the lifecycle to defer one, before its claim. Hooks must not
raise (a move is written by then, or the answer is a deferral): they keep their own books
and repair them themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pagefleet.jobs.record import JobMessage, JobRecord


@dataclass(frozen=True)
class Deferral:
    """Do not claim the job now: send its message again after ``delay_s``."""

    reason: str
    delay_s: int


class JobHooks(Protocol):
    def before_claim(self, message: JobMessage) -> Deferral | None:
        """Before every claim; a Deferral defers the job (its message is sent again with a
        delay, which never counts toward the dead-letter queue)."""
        ...

    def after_claim(self, job: JobRecord) -> None:
        """After a claim that started the job (``job`` as claimed)."""
        ...

    def after_claims(self, jobs: Sequence[JobRecord]) -> None:
        """What ``after_claim`` does for each of ``jobs``, told together (a worker gathers
        its claims for up to a second: browser_task.slot.ahead), in fewer writes."""
        ...

    def claim_not_made(self, message: JobMessage) -> None:
        """After ``before_claim`` let a message through but its claim started nothing, and
        the job is known not to be running (a copy of an ended, waiting, expired or not yet
        due job; a job that no longer exists): what ``before_claim`` took goes back."""
        ...

    def after_move(self, job: JobRecord) -> None:
        """After a move the lifecycle wrote (an attempt's outcome, the sweeper's take-back, a
        cancel, an expiry, a dead letter, a redrive), with the job as it is now."""
        ...

    def retention_s(self, tenant_id: str) -> int | None:
        """How long a job of the tenant's is kept after it ends, for an outcome's write to
        carry its expiry (None: unknown here; the jobs stream's retention consumer sets it)."""
        ...


class NoHooks:
    def before_claim(self, message: JobMessage) -> Deferral | None:
        return None

    def after_claim(self, job: JobRecord) -> None:
        return None

    def after_claims(self, jobs: Sequence[JobRecord]) -> None:
        return None

    def claim_not_made(self, message: JobMessage) -> None:
        return None

    def after_move(self, job: JobRecord) -> None:
        return None

    def retention_s(self, tenant_id: str) -> int | None:
        return None


NO_HOOKS: JobHooks = NoHooks()
