"""Job changes, as the jobs table's stream reports them, handed to each consumer in turn.

DynamoDB Streams allows two readers a shard, so one function (``functions/job_changes``)
reads the stream and every part that reacts to a job's change is a consumer here: the
release of waiting dependants, live delivery to WebSocket subscribers, completion
notifications. A consumer gets the whole batch, in stream order, and must be idempotent:
a failed batch is delivered again from its first record.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pagefleet.models import JobRecord
from pagefleet.states import JobStatus

log = logging.getLogger("pagefleet.changes")


@dataclass(frozen=True)
class JobChange:
    """One write to a job record: what it was (None: created) and is (None: deleted)."""

    old: JobRecord | None
    new: JobRecord | None
    sequence: str

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


class ChangeConsumer(Protocol):
    name: str

    def handle(self, changes: Sequence[JobChange]) -> None: ...


def deliver(changes: Sequence[JobChange], consumers: Sequence[ChangeConsumer]) -> list[str]:
    """Give the batch to every consumer; the names of those that failed (each logged)."""
    failed: list[str] = []
    for consumer in consumers:
        try:
            consumer.handle(changes)
        except Exception:
            log.exception("job change consumer %s failed", consumer.name)
            failed.append(consumer.name)
    return failed
