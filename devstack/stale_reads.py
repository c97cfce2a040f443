"""Eventually consistent reads in the embedded AWS: a new item may not be there yet.

DynamoDB's GetItem is eventually consistent unless it asks for ``ConsistentRead``: "the
responses may not reflect the results of a recently completed write operation. If you
repeat your read request after a short time, the response should eventually return the more
recent item"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html).
AWS gives no bound on "a short time"; a second is modelled here.
moto answers every read from the one copy it keeps, so code that read an item it (or the
API, a moment before) had just written, without asking for a consistent read, always found
it here and could miss it on AWS: a worker's first look at a job it was sent right after
the job was written is such a read.

Here, a ``share`` of the eventually consistent GetItems of an item created less than
``LAG_S`` ago answer as DynamoDB may: without the item. The share is counted, not drawn
(one read in ``1 / share``), so runs repeat. Only absence is modelled (the commonest
surprise, and the one that loses work); an older version of an item changed since, and
Query, Scan and BatchGetItem reads, are not. Off by default; on in the chaos bench and the
tests that need it (``devstack.strict_aws``, ``dynamodb_stale_read_share``).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from devstack.counted_share import CountedShare

# How long a new item may be missing from an eventually consistent read.
LAG_S = 1.0

_CREATED: dict[tuple[str, str], float] = {}  # item -> when it was created (monotonic)
_ORDER: collections.deque[tuple[float, tuple[str, str]]] = collections.deque()
_LOCK = threading.Lock()
_EVENTUAL = threading.local()  # set while a GetItem without ConsistentRead is answered


# The reads chosen to miss a new item (devstack.strict_aws resets and reads it).
MISSES = CountedShare()


def stale_new_items(share: Callable[[], float]) -> None:
    """From now on ``share()`` of the eventually consistent reads of new items miss them."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler

    put_item = Table.put_item

    def put(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if share() <= 0:
            return put_item(self, item_attrs, *args, **kwargs)
        names = [n for n in (self.hash_key_attr, self.range_key_attr) if n]
        key = _item(self.name, {n: item_attrs.get(n) for n in names})
        with _LOCK:
            new = key not in _CREATED and not _exists(self, item_attrs)
        done = put_item(self, item_attrs, *args, **kwargs)
        if new:
            _created(key)
        return done

    get_item = DynamoDBBackend.get_item

    def get(self: Any, table_name: str, keys: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        found = get_item(self, table_name, keys, *args, **kwargs)
        if found is None or not getattr(_EVENTUAL, "on", False):
            return found
        return None if _misses(_item(table_name, keys), share()) else found

    answer = DynamoHandler.get_item

    def eventual(self: Any) -> Any:
        _EVENTUAL.on = not self.body.get("ConsistentRead", False)
        try:
            return answer(self)
        finally:
            _EVENTUAL.on = False

    Table.put_item = put  # type: ignore[method-assign]
    DynamoDBBackend.get_item = get  # type: ignore[method-assign]
    DynamoHandler.get_item = eventual  # type: ignore[method-assign]


def _item(table_name: str, key: dict[str, Any]) -> tuple[str, str]:
    return table_name, json.dumps(key, sort_keys=True)


def _exists(table: Any, item_attrs: dict[str, Any]) -> bool:
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_value = DynamoType(item_attrs[table.hash_key_attr])
    range_attr = table.range_key_attr
    range_value = DynamoType(item_attrs[range_attr]) if range_attr else None
    try:
        return table.get_item(hash_value, range_value) is not None
    except Exception:  # moto refuses the put itself
        return True


def _created(key: tuple[str, str]) -> None:
    now = time.monotonic()
    with _LOCK:
        _CREATED[key] = now
        _ORDER.append((now, key))
        while _ORDER and _ORDER[0][0] < now - LAG_S:
            _, old = _ORDER.popleft()
            if _CREATED.get(old, now) < now - LAG_S:
                del _CREATED[old]


def _misses(key: tuple[str, str], share: float) -> bool:
    """Whether this read of ``key`` misses it: new, and the counted share's turn."""
    with _LOCK:
        created = _CREATED.get(key)
    if created is None or created < time.monotonic() - LAG_S:
        return False
    return MISSES.next(share)
