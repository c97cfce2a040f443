"""Listing a tenant's jobs with filters: what a filter keeps, and how a page is filled.

The status filter picks the index partition (``by_status``); the others (the request's
``name``, the named ``workflow``, the ``schedule_id`` that made the job) are applied to the
items a query reads (a DynamoDB FilterExpression; the in-memory fake the same way). A query's
``Limit`` counts the items it reads, not the ones it keeps, so a page is filled by reading on
while matches are few, at most ``MAX_READS`` times a request: where matches are rare a page
may come back short (even empty) with a ``next_cursor`` to read on from. Both job stores fill
pages with ``fill_page`` so they page the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pagefleet.jobs.record import JobRecord

# A filtered read evaluates at least this many items (a read of `limit` items would take
# many reads to fill a page where one job in ten matches), at most MAX_READS reads a page.
READ_ITEMS = 100
MAX_READS = 5
QUERY_LIMIT_MAX = 1000

# One query: (Limit, ExclusiveStartKey) -> (the kept items of those read, LastEvaluatedKey).
Read = Callable[[int, dict[str, Any] | None], tuple[list[JobRecord], dict[str, Any] | None]]


def fill_page(
    read: Read,
    *,
    limit: int,
    start_key: dict[str, Any] | None,
    filtered: bool,
    key_of: Callable[[JobRecord], dict[str, Any]],
) -> tuple[list[JobRecord], dict[str, Any] | None]:
    """Up to ``limit`` jobs and the key to go on from (None: nothing after them)."""
    found: list[JobRecord] = []
    key = start_key
    for _ in range(MAX_READS):
        wanted = limit - len(found)
        size = min(QUERY_LIMIT_MAX, max(wanted, READ_ITEMS) if filtered else wanted)
        kept, key = read(size, key)
        found += kept
        if len(found) >= limit or key is None:
            break
    if len(found) > limit:
        # A read kept more than the page takes: go on from the last job shown.
        found = found[:limit]
        key = key_of(found[-1])
    return found, key
