"""DynamoDB transactions take time in the embedded AWS, and meet each other as on AWS.

AWS cancels a ``TransactWriteItems`` when one of its items is part of another transaction
still under way: ``TransactionCanceledException``, that item's reason ``TransactionConflict``,
nothing written (the API reference's list of cancellations; the developer guide's
"Transaction conflict handling"). moto applies each transaction at once, under the embedded
AWS's one DynamoDB lock (``devstack.embedded_aws``): no transaction is ever under way when
another arrives, so code that lets a conflict raise passed here and lost writes on AWS.

Here a transaction is under way for ``hold_s`` before it is applied, outside that lock (other
requests go on meanwhile), its items held; another transaction naming one of them in that
time is cancelled as AWS cancels it, and a PutItem, UpdateItem or DeleteItem of one is
refused with ``TransactionConflictException``, as AWS refuses it. A request that starts
after the transaction returned never meets it, as on AWS. docs/decisions.md, 2026-12-06,
"Transactions that meet".
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

_HELD: Counter[tuple[str, str]] = Counter()  # items of transactions under way
_LOCK = threading.Lock()
_KINDS = ("Put", "Update", "Delete", "ConditionCheck")
_PLAIN = {".PutItem": "Put", ".UpdateItem": "Update", ".DeleteItem": "Delete"}
_CONFLICT = "com.amazonaws.dynamodb.v20120810#TransactionConflictException"


def hold_transactions(hold_s: Callable[[], float]) -> None:
    """From now on each transaction is under way for ``hold_s()`` (read per request; 0: off).
    Installed after ``devstack.embedded_aws.prepare_moto``, so the hold is outside its lock."""
    from moto.dynamodb.exceptions import TransactionCanceledException
    from moto.dynamodb.responses import DynamoHandler

    apply = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        hold = hold_s()
        target = str(self.headers.get("X-Amz-Target", ""))
        if hold <= 0:
            return apply(self)
        plain = next((kind for end, kind in _PLAIN.items() if target.endswith(end)), None)
        if plain is not None:
            if not _HELD:  # no transaction under way: nothing to meet (the usual case)
                return apply(self)
            request = json.loads(self.body or "{}")
            with _LOCK:
                held = _item(self, plain, request) in _HELD
            if not held:
                return apply(self)
            body = json.dumps(
                {"__type": _CONFLICT, "message": "Transaction is ongoing for the item"}
            )
            return 400, {"Content-Type": "application/x-amz-json-1.0"}, body
        if not target.endswith(".TransactWriteItems"):
            return apply(self)
        items = _items(self)
        with _LOCK:
            met = [item in _HELD for item in items]
            if not any(met):
                _HELD.update(items)
        if any(met):
            refused = TransactionCanceledException(
                [
                    ("TransactionConflict", "Transaction is ongoing for the item", None)
                    if held
                    else (None, None, None)
                    for held in met
                ]
            )
            return refused.code, {"Content-Type": "application/x-amz-json-1.0"}, refused.description
        try:
            time.sleep(hold)
            return apply(self)
        finally:
            with _LOCK:
                _HELD.subtract(items)
                for item in items:
                    if _HELD[item] <= 0:
                        del _HELD[item]

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


def under_way() -> int:
    """How many items transactions hold now (tests wait for one to be under way)."""
    with _LOCK:
        return len(_HELD)


def _items(handler: Any) -> list[tuple[str, str]]:
    """Each action's item, as (table, its key in canonical JSON), in the request's order."""
    found = []
    for entry in json.loads(handler.body or "{}").get("TransactItems", []):
        for kind in _KINDS:
            op = entry.get(kind)
            if isinstance(op, dict):
                found.append(_item(handler, kind, op))
    return found


def _item(handler: Any, kind: str, op: dict[str, Any]) -> tuple[str, str]:
    """The item a write names (a put by its key's attributes), as (table, canonical key)."""
    table_name = str(op.get("TableName", ""))
    key = op.get("Key") if kind != "Put" else _key_of(handler, table_name, op)
    return table_name, json.dumps(key, sort_keys=True)


def _key_of(handler: Any, table_name: str, put: dict[str, Any]) -> dict[str, Any]:
    item = put.get("Item") or {}
    try:
        table = handler.dynamodb_backend.get_table(table_name)
    except Exception:  # moto refuses the request itself
        return dict(item)
    names = [n for n in (table.hash_key_attr, table.range_key_attr) if n]
    return {name: item.get(name) for name in names}
