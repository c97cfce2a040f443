"""Every ``TransactWriteItems`` of ours, tried again while it meets another transaction.

DynamoDB cancels a transaction when an item it writes is part of another transaction still
under way ("There is an ongoing TransactWriteItems operation that conflicts with a concurrent
TransactWriteItems request"): cancelled whole, the item's reason
``TransactionConflict``, nothing written. botocore does not try it again (it is not a
throttle or a server fault), and each place that wrote alone let it raise: a tenant's usage
(every attempt's transaction adds to the tenant's day) was lost whenever two of its
attempts ended together. Nothing was written, so the same request is simply sent again,
after a wait that grows (spread, yet never much shorter than its step, so the tries outlast
the other transaction); a refusal for a condition is an answer, never tried again. (A plain
write that meets a transaction is sent again by the client: ``client_config``.)
docs/decisions.md, 2026-12-06, "Transactions that meet".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from pagefleet.adapters.client_config import CONFLICT_BACKOFF, CONFLICT_TRIES
from pagefleet.adapters.dynamodb.codec import met_another_transaction
from pagefleet.backoff import Backoff


def write_together(
    db: Any,
    items: Sequence[Any],
    *,
    tries: int = CONFLICT_TRIES,
    backoff: Backoff = CONFLICT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """``TransactWriteItems`` of ``items``, sent again while it meets another transaction;
    any other refusal raises as DynamoDB answered it (the last conflict after ``tries``)."""
    for attempt, wait in enumerate(backoff.ladder(tries), start=1):
        if wait:
            sleep(wait)
        try:
            db.transact_write_items(TransactItems=list(items))
            return
        except ClientError as exc:
            if attempt == tries or not met_another_transaction(exc):
                raise
