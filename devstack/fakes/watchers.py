"""The in-memory job store's watch marks, as the DynamoDB store keeps them
(pagefleet/adapters/dynamodb/watchers.py): a map of connection -> until beside the record."""

from __future__ import annotations

from typing import Any

from pagefleet.errors import NotFound
from pagefleet.jobs.ports import RunSignals


class FakeWatchers:
    """Mixed into FakeJobStore (it has ``_lock``, ``_rows`` and ``_watchers``)."""

    _lock: Any
    _rows: dict[tuple[str, str], Any]
    _watchers: dict[tuple[str, str], dict[str, int]]

    def run_signals(self, tenant_id: str, job_id: str, *, now: int) -> RunSignals:
        with self._lock:
            row = self._rows.get((tenant_id, job_id))
            watchers = self._watchers.get((tenant_id, job_id), {})
            return RunSignals(
                cancel_requested=row is not None and row.job.cancel_requested_at is not None,
                watchers=frozenset(c for c, until in watchers.items() if until >= now),
                takeover=row.job.takeover if row is not None else None,
            )

    def watch(
        self, tenant_id: str, job_id: str, connection_id: str, *, until: int, now: int
    ) -> None:
        with self._lock:
            if (tenant_id, job_id) not in self._rows:
                raise NotFound(f"job {job_id} not found", job_id=job_id)
            watchers = self._watchers.setdefault((tenant_id, job_id), {})
            for stale in [c for c, u in watchers.items() if u < now]:
                del watchers[stale]
            watchers[connection_id] = until

    def unwatch(self, tenant_id: str, job_id: str, connection_id: str) -> None:
        with self._lock:
            self._watchers.get((tenant_id, job_id), {}).pop(connection_id, None)
