"""DynamoDB's batch calls within their limits, what they leave unprocessed asked again.

AWS: BatchGetItem reads "up to 100 items" a request, BatchWriteItem writes "up to 25 put or
delete requests"; either may leave part of a request unprocessed (``UnprocessedKeys``,
``UnprocessedItems``: throttled, or a read over 16 MB), which AWS advises to send again
with an exponential backoff. What is still left after that is ``StoreBusy`` (a 503 that
asks for the same request again), never an answer without it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pagefleet.errors import StoreBusy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25
# Before each send of what is left: the first at once, then backing off (about 4 s in all).
BACKOFF_S = (0.0, 0.05, 0.2, 0.5, 1.0, 2.0)


def get_all(
    db: DynamoDBClient, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool = True
) -> list[dict[str, Any]]:
    """The items of ``table`` at ``keys`` (wire form, distinct), those that exist, in no
    particular order: one BatchGetItem per ``BATCH_GET_MAX`` keys."""
    found: list[dict[str, Any]] = []
    for first in range(0, len(keys), BATCH_GET_MAX):
        request: Any = {table: {"Keys": list(keys[first : first + BATCH_GET_MAX])}}
        request[table]["ConsistentRead"] = consistent
        for delay in BACKOFF_S:
            time.sleep(delay)
            resp = db.batch_get_item(RequestItems=request)
            found += resp.get("Responses", {}).get(table, [])
            request = dict(resp.get("UnprocessedKeys") or {})
            if not request:
                break
        else:
            left = len(request[table]["Keys"])
            raise StoreBusy(f"{left} items of {table} were left unread; retry")
    return found


def write_all(db: DynamoDBClient, table: str, requests: Sequence[dict[str, Any]]) -> None:
    """``requests`` (``PutRequest`` / ``DeleteRequest``, distinct keys) in order, one
    BatchWriteItem per ``BATCH_WRITE_MAX``: a chunk is done before the next is sent."""
    for first in range(0, len(requests), BATCH_WRITE_MAX):
        left: Any = list(requests[first : first + BATCH_WRITE_MAX])
        for delay in BACKOFF_S:
            time.sleep(delay)
            resp = db.batch_write_item(RequestItems={table: left})
            left = resp.get("UnprocessedItems", {}).get(table, [])
            if not left:
                break
        else:
            raise StoreBusy(f"{len(left)} writes to {table} were left unprocessed; retry")
