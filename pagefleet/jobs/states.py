"""The job lifecycle: one enum and one transition table.

The DynamoDB adapter turns this table into condition expressions, so an illegal move is
refused by the database itself, not only by Python.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    SCHEDULED = "scheduled"  # delayed: waits for its run_at
    WAITING = "waiting"  # depends on jobs that have not all succeeded yet
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_SCHEDULED = "retry_scheduled"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    DEAD_LETTERED = "dead_lettered"
    # An irreversible step's outcome is unknown: never retried automatically, resolved by a
    # person (POST /v1/jobs/{id}/resolve).
    NEEDS_REVIEW = "needs_review"
    # An await_human step asked a person: the worker keeps the browser context (and the
    # lease: it heartbeats) but not the tenant's running slot, until the person continues
    # it (POST /v1/jobs/{id}/continue) or the step's timeout_s passes.
    WAITING_FOR_HUMAN = "waiting_for_human"

    @property
    def is_final(self) -> bool:
        return not TRANSITIONS[self]

    @property
    def is_settled(self) -> bool:
        """Nothing more happens to the job without a person: final, dead-lettered (kept for
        a redrive) or in review (kept for a resolution). No worker holds it."""
        return self.is_final or self in AWAITING_A_PERSON


_S = JobStatus

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    # A due scheduled job is claimed straight from its delayed message (no queued step).
    _S.SCHEDULED: frozenset({_S.RUNNING, _S.CANCELLED, _S.EXPIRED, _S.DEAD_LETTERED}),
    # Released to the queue when every parent succeeded; cancelled when one did not.
    _S.WAITING: frozenset({_S.QUEUED, _S.CANCELLED, _S.EXPIRED}),
    _S.QUEUED: frozenset({_S.RUNNING, _S.CANCELLED, _S.EXPIRED, _S.DEAD_LETTERED, _S.NEEDS_REVIEW}),
    # running -> running is a reclaim: a new attempt takes over a job whose lease expired.
    _S.RUNNING: frozenset(
        {
            _S.RUNNING,
            _S.SUCCEEDED,
            _S.FAILED,
            _S.TIMED_OUT,
            _S.CANCELLED,
            _S.RETRY_SCHEDULED,
            _S.DEAD_LETTERED,
            _S.NEEDS_REVIEW,
            _S.WAITING_FOR_HUMAN,
        }
    ),
    # Back to running when the person continues it or its wait times out (then it fails
    # from running); cancelled while it waits; in review when its worker died with the
    # context the person may have worked in (never a blind retry).
    _S.WAITING_FOR_HUMAN: frozenset({_S.RUNNING, _S.CANCELLED, _S.NEEDS_REVIEW}),
    # From retry_scheduled and queued too: a dead letter of a job whose irreversible step
    # started goes to review (a redriven or resolved job is queued with its checkpoints).
    _S.RETRY_SCHEDULED: frozenset(
        {_S.RUNNING, _S.CANCELLED, _S.EXPIRED, _S.DEAD_LETTERED, _S.NEEDS_REVIEW}
    ),
    # A dead-lettered job is kept for inspection and can be redriven.
    _S.DEAD_LETTERED: frozenset({_S.QUEUED}),
    # Resolved by a person: done (succeeded), done and go on, or not done (queued again);
    # or given up (cancelled). Never claimed from here.
    _S.NEEDS_REVIEW: frozenset({_S.SUCCEEDED, _S.QUEUED, _S.CANCELLED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.TIMED_OUT: frozenset(),
    _S.CANCELLED: frozenset(),
    _S.EXPIRED: frozenset(),
}

FINAL_STATES: frozenset[JobStatus] = frozenset(s for s in JobStatus if s.is_final)
# The states in which a worker holds the job's attempt under its lease (and heartbeats it).
HELD_STATES: frozenset[JobStatus] = frozenset({_S.RUNNING, _S.WAITING_FOR_HUMAN})
AWAITING_A_PERSON: frozenset[JobStatus] = frozenset({_S.DEAD_LETTERED, _S.NEEDS_REVIEW})


def sources_of(target: JobStatus) -> frozenset[JobStatus]:
    """Every state from which ``target`` may be entered."""
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)


def can_transition(current: JobStatus, target: JobStatus) -> bool:
    return target in TRANSITIONS[current]
