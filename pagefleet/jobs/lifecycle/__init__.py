"""THE job lifecycle: every move of a job, and the one way to send a job message.

The API (submit, cancel, redrive), the worker (claim, heartbeat, finish, defer), the
dead-letters handler and the sweeper all move jobs through this class and nothing else.
Each move is one conditional write in the ``JobStore`` (the transition table and the
attempt/owner fence are enforced there); what happens to the SQS message that asked for the
move (delete, hide, hand back) is decided and done here too, so the whole life of a
message can be tested on in-memory fakes.

Every method is safe to run twice or concurrently: a refused write means someone else
moved the job first, and the answer says what to do with the message.
"""

from __future__ import annotations

from pagefleet.jobs.lifecycle.dispatch import DispatchMoves
from pagefleet.jobs.lifecycle.recovery import RecoveryMoves
from pagefleet.jobs.lifecycle.worker import WorkerMoves
from pagefleet.jobs.moves import MessageAnswer, Outcome, Then, expired_error


class Lifecycle(WorkerMoves, RecoveryMoves, DispatchMoves):
    """Every move of a job; the parts live in this package's modules, one per caller."""


# Re-exported: the worker takes these from here with the Lifecycle.
__all__ = ["Lifecycle", "MessageAnswer", "Outcome", "Then", "expired_error"]
