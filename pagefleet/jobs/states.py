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

    @property
    def is_final(self) -> bool:
        return not TRANSITIONS[self]


_S = JobStatus

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    # A due scheduled job is claimed straight from its delayed message (no queued step).
    _S.SCHEDULED: frozenset({_S.RUNNING, _S.CANCELLED, _S.EXPIRED, _S.DEAD_LETTERED}),
    # Released to the queue when every parent succeeded; cancelled when one did not.
    _S.WAITING: frozenset({_S.QUEUED, _S.CANCELLED, _S.EXPIRED}),
    _S.QUEUED: frozenset({_S.RUNNING, _S.CANCELLED, _S.EXPIRED, _S.DEAD_LETTERED}),
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
        }
    ),
    _S.RETRY_SCHEDULED: frozenset({_S.RUNNING, _S.CANCELLED, _S.EXPIRED, _S.DEAD_LETTERED}),
    # A dead-lettered job is kept for inspection and can be redriven.
    _S.DEAD_LETTERED: frozenset({_S.QUEUED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.TIMED_OUT: frozenset(),
    _S.CANCELLED: frozenset(),
    _S.EXPIRED: frozenset(),
}

FINAL_STATES: frozenset[JobStatus] = frozenset(s for s in JobStatus if s.is_final)


def sources_of(target: JobStatus) -> frozenset[JobStatus]:
    """Every state from which ``target`` may be entered."""
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)


def can_transition(current: JobStatus, target: JobStatus) -> bool:
    return target in TRANSITIONS[current]
