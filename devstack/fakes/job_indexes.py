"""The in-memory job store's reads of what DynamoDB keeps in indexes and edges: a tenant's
listing (newest first, by status), the sweeper's unqueued and ops sets, a status's count and
oldest job, a job's dependants (pagefleet/adapters/dynamodb/listing.py and dispatch.py)."""

from __future__ import annotations

from typing import Any

from pagefleet.adapters.dynamodb.codec import listing_key
from pagefleet.jobs.listing import fill_page
from pagefleet.jobs.ports import NO_FILTER, JobFilter
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus


def _of_kind(ops_pk: str, kind: str) -> bool:
    """Whether an ops index key is in ``kind``'s set ("dead" is one key; the others sharded)."""
    return ops_pk == kind if kind == "dead" else ops_pk.startswith(f"{kind}#")


class FakeJobIndexes:
    """Mixed into FakeJobStore (it has ``_lock``, ``_rows`` and ``_edges``)."""

    _lock: Any
    _rows: Any
    _edges: Any

    def list_page(
        self,
        tenant_id: str,
        *,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
        where: JobFilter = NO_FILTER,
    ) -> tuple[list[JobRecord], dict[str, Any] | None]:
        with self._lock:
            jobs = sorted(
                (r.job for (t, _), r in self._rows.items() if t == tenant_id),
                key=lambda j: j.job_id,
                reverse=True,
            )
        if status is not None:
            jobs = [j for j in jobs if j.status is status]

        def read(size: int, start: dict[str, Any] | None) -> tuple[list[JobRecord], Any]:
            # As a DynamoDB query: `size` items read after `start`, the filter applied to them.
            after = str(start["sk"]).removeprefix("JOB#") if start else None
            rest = [j for j in jobs if after is None or j.job_id < after]
            batch = rest[:size]
            last = listing_key(tenant_id, batch[-1].job_id, status) if len(rest) > size else None
            return [j.model_copy(deep=True) for j in batch if where.matches(j)], last

        return fill_page(
            read,
            limit=limit,
            start_key=start_key,
            filtered=bool(where),
            key_of=lambda job: listing_key(tenant_id, job.job_id, status),
        )

    def list_unqueued(self, created_before: str, limit: int = 100) -> list[JobRecord]:
        with self._lock:
            found = [
                r.job.model_copy(deep=True)
                for r in self._rows.values()
                if r.unqueued and r.job.created_at < created_before
            ]
        return found[:limit]

    def ops_due(self, kind: str, before_epoch: int, limit: int = 100) -> list[tuple[str, str]]:
        with self._lock:
            due = [
                (r.ops[1], r.job.tenant_id, r.job.job_id)
                for r in self._rows.values()
                if r.ops is not None and _of_kind(r.ops[0], kind) and r.ops[1] < before_epoch
            ]
        return [(tenant, job) for _, tenant, job in sorted(due)][: limit * 4]

    def next_due(self, kind: str, after_epoch: int) -> int | None:
        with self._lock:
            return min(
                (
                    r.ops[1]
                    for r in self._rows.values()
                    if r.ops is not None and _of_kind(r.ops[0], kind) and r.ops[1] >= after_epoch
                ),
                default=None,
            )

    def count(self, tenant_id: str, status: JobStatus) -> int:
        with self._lock:
            return sum(
                1 for (t, _), r in self._rows.items() if t == tenant_id and r.job.status is status
            )

    def oldest(self, tenant_id: str, status: JobStatus) -> JobRecord | None:
        with self._lock:
            found = sorted(
                (r.job for (t, _), r in self._rows.items() if t == tenant_id),
                key=lambda j: j.job_id,
            )
        first = next((j for j in found if j.status is status), None)
        return first.model_copy(deep=True) if first else None

    def dependants(self, tenant_id: str, job_id: str) -> list[str]:
        with self._lock:
            return list(self._edges.get((tenant_id, job_id), []))
