"""Dependants released by their parents' final transitions (a job-changes consumer).

When a job reaches a final state, each job that waits for it is settled: released to the
queue when all its parents have succeeded, cancelled (naming the parent) when one ended
otherwise. The jobs stream drives this; the sweeper catches a missed release.
"""

from __future__ import annotations

from collections.abc import Sequence

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.lifecycle import Lifecycle


class DependencyRelease:
    name = "dependencies"

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle

    def handle(self, changes: Sequence[JobChange]) -> None:
        for change in changes:
            became = change.became
            if change.new is None or became is None or not became.is_final:
                continue
            if change.may_have_dependants:  # most jobs have none: no lookup then
                self._lifecycle.release_dependants(change.new)
