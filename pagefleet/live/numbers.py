"""Where a job's run-event numbers come from: the counter on its record.

A job's events are numbered from one counter (increasing, never reused: two writers of a
job reserve disjoint ranges). The counter lives on the job's record (``events_seq``,
``events_bounded``), so a claim reserves its attempt's first ``RESERVE`` numbers in the
write it makes anyway, and a plain job's events cost no write of their own beyond their put
(docs/decisions.md, 2026-12-06). A job recorded before the counter moved there has none on
its record (``events_seq`` None) and keeps its own counter item (``EventStore.allocate``)
to its end: its numbers must go on from where they were (``JobRecord.events_on_record``).
"""

from __future__ import annotations

from typing import Protocol

from pagefleet.jobs.ports import JobStore
from pagefleet.jobs.record import JobRecord
from pagefleet.live.ports import EventStore

# Numbers (and allowance) a claim reserves for its attempt, and an attempt reserves beyond
# each batch it must ask for: a plain job's events (its steps, its outcome) fit.
RESERVE = 32


class EventNumbers(Protocol):
    def __call__(
        self, tenant_id: str, job_id: str, *, count: int, bounded: int, expires_at: int
    ) -> tuple[int, int]:
        """Reserve ``count`` numbers, ``bounded`` of them for bounded kinds: (the first
        reserved number, bounded events reserved so far for the job, these included)."""
        ...


def numbers_of(job: JobRecord, jobs: JobStore, events: EventStore) -> EventNumbers:
    """The counter ``job``'s events are numbered from."""
    return jobs.allocate_events if job.events_on_record else events.allocate


def claimed_range(job: JobRecord, reserved: int) -> tuple[int, int, int]:
    """What a claim that reserved ``reserved`` numbers gave its attempt (``job``: the record
    the claim's write returned): (first number, last number, bounded events reserved for the
    job before it)."""
    assert job.events_seq is not None
    last = job.events_seq
    return last - reserved + 1, last, job.events_bounded - reserved
