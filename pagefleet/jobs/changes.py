"""Job changes, as the jobs table's stream reports them, handed to each consumer in turn.

DynamoDB Streams allows two readers a shard, so one function (``functions/job_changes``)
reads the stream and every part that reacts to a job's change is a consumer here: the
release of waiting dependants, live delivery to WebSocket subscribers, completion
notifications. A consumer gets the whole batch, in stream order, and must be idempotent:
a batch is delivered again from the record that failed.

The stream also carries the run events workers write (``EVT#`` items,
``pagefleet.adapters.dynamodb.events``): a consumer with ``handle_batch`` gets them along with
the job changes of the same batch (live delivery sends both). Stream records become these
types in ``pagefleet.adapters.dynamodb.stream`` (the jobs table's layout is the adapter's).

A stream is read in order: ``deliver_in_order`` says which record the batch stopped at, so
the reader reports that record (``batchItemFailures``) and the records before it are done;
one bad record does not send the whole batch to be retried and, in the end, dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

log = logging.getLogger("pagefleet.changes")


@dataclass(frozen=True)
class JobChange:
    """One write to a job record: what it was (None: created) and is (None: deleted)."""

    old: JobRecord | None
    new: JobRecord | None
    sequence: str
    # When the stream recorded the write (ApproximateCreationDateTime), epoch seconds.
    written_at: float | None = None
    # False when the store says the job never had a dependant (no edges to look up).
    may_have_dependants: bool = True
    # The expiry (TTL attribute, epoch seconds) this write set; None if it set none.
    expiry_set: int | None = None

    @property
    def job(self) -> JobRecord:
        found = self.new or self.old
        assert found is not None
        return found

    @property
    def status_changed(self) -> bool:
        before = self.old.status if self.old else None
        after = self.new.status if self.new else None
        return before is not after

    @property
    def became(self) -> JobStatus | None:
        """The status this change moved the job into, if it moved it."""
        return self.new.status if self.new is not None and self.status_changed else None


@dataclass(frozen=True)
class EventsWritten:
    """A batch of run events a worker stored (one ``EVT#`` item), in ``seq`` order."""

    tenant_id: str
    job_id: str
    events: list[dict[str, Any]]
    sequence: str
    written_at: float | None = None


@dataclass(frozen=True)
class StreamRecord:
    """One stream record as the reader reads it: a job change, a run-events write, neither
    (an item no consumer takes), or unreadable (``error`` says why)."""

    sequence: str
    change: JobChange | None = None
    events: EventsWritten | None = None
    error: str | None = None


class ChangeConsumer(Protocol):
    name: str

    def handle(self, changes: Sequence[JobChange]) -> None: ...


def deliver(
    changes: Sequence[JobChange],
    consumers: Sequence[ChangeConsumer],
    events: Sequence[EventsWritten] = (),
) -> list[str]:
    """Give the batch to every consumer; the names of those that failed (each logged)."""
    failed: list[str] = []
    for consumer in consumers:
        try:
            # A consumer with ``handle_batch(changes, events)`` takes the run events too.
            with_events = getattr(consumer, "handle_batch", None)
            if with_events is not None:
                with_events(changes, events)
            elif changes:
                consumer.handle(changes)
        except Exception:
            log.exception("job change consumer %s failed", consumer.name)
            failed.append(consumer.name)
    return failed


def deliver_in_order(
    records: Sequence[StreamRecord], consumers: Sequence[ChangeConsumer]
) -> str | None:
    """Deliver a stream batch; the sequence number of the first record that failed, or None.

    Stream checkpoint semantics: the records before the returned one are delivered; it and
    every record after it come again. The batch goes to every consumer at once (live delivery
    merges a job's events into one message); a consumer that fails it gets it again record by
    record, in order, up to the record it fails on. An unreadable record fails where it is.
    """
    cut = next((i for i, r in enumerate(records) if r.error is not None), len(records))
    head = records[:cut]
    changes = [r.change for r in head if r.change is not None]
    events = [r.events for r in head if r.events is not None]
    failed = set(deliver(changes, consumers, events)) if changes or events else set()
    if failed:
        again = [c for c in consumers if c.name in failed]
        for record in head:
            if record.change is None and record.events is None:
                continue
            one_change = [record.change] if record.change is not None else []
            one_events = [record.events] if record.events is not None else []
            if deliver(one_change, again, one_events):
                return record.sequence
    if cut < len(records):
        log.error("stream record %s is unreadable: %s", records[cut].sequence, records[cut].error)
        return records[cut].sequence
    return None
