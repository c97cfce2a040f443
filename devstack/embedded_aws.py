"""moto server as pagefleet's embedded AWS, made atomic where we rely on it and fast enough.

Run as ``python -m devstack.embedded_aws -H 127.0.0.1 -p PORT``. moto's application is
served by waitress rather than moto's own werkzeug development server, which answers every
request with ``Connection: close``: each boto3 call then paid a TCP connect and a thread
start, and the local stack's workers spent a tenth of their CPU on it. waitress keeps
connections alive and serves from a fixed pool of threads (sized for the SQS long polls,
which each hold one). Before serving, ``prepare_moto`` patches moto in this process:

- **Atomic DynamoDB writes.** DynamoDB evaluates a condition expression and applies the
  write atomically; moto's threaded server does not (two concurrent conditional updates can
  both pass their check), which would let two workers claim one job. Each DynamoDB request
  runs alone.
- **Item-level transaction rollback.** moto backs up every table a transaction touches with
  a deep copy of the whole table, so each TransactWriteItems cost grew with the number of
  jobs ever stored (and, serialized, held up every other DynamoDB call). Backing up the
  items the transaction names gives the same all-or-nothing result.
- **Queries read their partition.** moto answers every Query (and Scan) by sorting the whole
  table with Python comparisons, then filtering: each Query's cost grew with every item ever
  stored, and, serialized with every other DynamoDB call, held them up. A Query on the
  table's own key reads its partition's items, keeps those its sort-key condition keeps, and
  moto sorts and pages those; the whole-table order is taken on plain values.
- **Item answers as they are.** moto serializes every answer by walking the operation's
  shape model, a few milliseconds for one job record (most of an UpdateItem's cost). An
  item operation's result is already the wire's JSON (attribute values as DynamoDB writes
  them): when it holds nothing but JSON values it is sent as it is (the same bytes the
  serializer makes, checked by a test); anything else goes through the serializer. So are
  the jobs stream's records (GetRecords), with each record's time as the serializer writes it.
- **Cheaper dispatch and expressions.** What moto worked out again for every request (its
  package directory listed on disk, its handler's method names, each update expression's
  parse, each condition's tokens, the validator's maps of node types) is kept
  (``devstack.cheap_moto``); request logging is off.
- **SQS calls that do not count the queue.** moto built every attribute of a queue, its
  approximate counts included (a pass over every message each), for each message a receive
  hands out, for each send, and several times per GetQueueAttributes: each cost grew with
  the queue's depth. What they read is taken without the counts (``devstack.cheap_sqs``).

Then it applies the rules by which it refuses what AWS refuses (``devstack.strict_aws``: a
queue unusable in its first second, at-least-once delivery, SQS's and DynamoDB's sizes), as
``PAGEFLEET_STRICT_AWS_*`` in its environment set them (on unless ``..._ON=false``).

With ``PAGEFLEET_IAM_BOOK`` in its environment (the local stack sets it) every call is
checked against its caller's policies in the synthesized template (``devstack.iam.guard``).

With ``PAGEFLEET_COUNT_AWS_CALLS=1`` in its environment the server also counts the calls it
answers, and the CPU time each took, by operation (DynamoDB's by table too); ``GET
/_pagefleet/calls`` returns the counts so far (benches read it before and after a run).
``GET /_pagefleet/strict`` returns what the rules that answer as AWS sometimes does made
(``devstack.strict_aws.made``: duplicates, missed reads, batches part done or failed).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from devstack.call_counter import COUNT_ENV, CallCounter
from devstack.cheap_moto import make_moto_cheap
from devstack.cheap_sqs import make_sqs_cheap
from devstack.strict_aws import MADE_PATH, StrictRules, enforce, in_force, made

_DYNAMODB_LOCK = threading.RLock()
_PREPARED = False
# Every worker slot, poller and Lambda environment may hold a long poll (one thread each).
SERVER_THREADS = 64
MAX_CONNECTIONS = 1000


def prepare_moto() -> None:
    """Patch moto in this process (see the module docstring). Idempotent."""
    global _PREPARED
    with _DYNAMODB_LOCK:
        if _PREPARED:
            return
        _make_dynamodb_atomic()
        _item_level_transactions()
        _partition_queries()
        _plain_item_answers()
        _plain_stream_records()
        make_moto_cheap()
        make_sqs_cheap()
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        _PREPARED = True


def _make_dynamodb_atomic() -> None:
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _DYNAMODB_LOCK:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


class _CopyKeepingTables:
    """Stands in for ``copy`` inside moto's DynamoDB backend: a Table is not deep-copied
    (its transaction backup is taken per item instead); everything else is."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, self._table_type):
            return value
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _backup(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What each item a transaction writes holds now, and its table's stream length."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    saved = []
    for entry in transact_items:
        if len(entry) != 1:
            continue  # moto refuses it before writing anything
        op_type, op = next(iter(entry.items()))
        table = backend.tables.get(op.get("TableName"))
        source = op.get("Item") if op_type == "Put" else op.get("Key")
        if table is None or not isinstance(source, dict):
            continue
        try:
            hash_key = DynamoType(source[table.hash_key_attr])
            range_key = DynamoType(source[table.range_key_attr]) if table.range_key_attr else None
        except KeyError:
            continue  # moto rejects the item; nothing of it is written
        current = table.get_item(hash_key, range_key)
        stream = table.stream_shard
        saved.append(
            (
                table,
                hash_key,
                range_key,
                copy.deepcopy(current),
                len(stream.items) if stream is not None else 0,
            )
        )
    return saved


def _restore(saved: list[tuple[Any, ...]]) -> None:
    for table, hash_key, range_key, item, stream_length in reversed(saved):
        if range_key is not None:
            bucket = table.items[hash_key]
            if item is None:
                bucket.pop(range_key, None)
                if not bucket:
                    del table.items[hash_key]
            else:
                bucket[range_key] = item
        elif item is None:
            table.items.pop(hash_key, None)
        else:
            table.items[hash_key] = item
        if table.stream_shard is not None:
            del table.stream_shard.items[stream_length:]


def _item_level_transactions() -> None:
    import moto.dynamodb.models as models
    from moto.dynamodb.models.table import Table

    original = models.DynamoDBBackend.transact_write_items
    models.copy = _CopyKeepingTables(Table)  # type: ignore[assignment]

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = _backup(self, transact_items)
        try:
            original(self, transact_items)
        except Exception:
            _restore(saved)
            raise

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


# The partition a Query on a table's key reads, for the thread answering it.
_QUERY_SCOPE = threading.local()


def _partition_queries() -> None:
    import inspect

    from moto.dynamodb.models.table import Table

    original_query = Table.query
    signature = inspect.signature(original_query)

    def all_items(self: Any) -> list[Any]:
        scope = getattr(_QUERY_SCOPE, "scope", None)
        if scope is not None and scope[0] is self:
            _, hash_key, keep = scope
            bucket = self.items.get(hash_key)
            if bucket is None:
                return []
            found = list(bucket.values()) if self.range_key_attr else [bucket]
            return [item for item in found if keep(item)]
        items = [
            item
            for bucket in self.items.values()
            for item in (bucket.values() if self.range_key_attr else [bucket])
        ]
        # The order moto's own all_items gives, compared on plain values.
        if self.range_key_attr:
            return sorted(items, key=lambda i: (i.hash_key.cast_value, i.range_key.cast_value))
        return sorted(items, key=lambda i: i.hash_key.cast_value)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        call = signature.bind(self, *args, **kwargs).arguments
        hash_key = call.get("hash_key")
        if call.get("index_name") or hash_key is None or call.get("filter_kwargs"):
            return original_query(self, *args, **kwargs)
        comparison, values = call.get("range_comparison"), call.get("range_objs")

        def keep(item: Any) -> bool:
            # The same test moto applies to a table query's sort key, applied first.
            return not comparison or bool(item.range_key.compare(comparison, values))

        _QUERY_SCOPE.scope = (self, hash_key, keep)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _QUERY_SCOPE.scope = None

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]


# Operations whose answers are items, counts and keys: plain JSON when moto builds them.
_ITEM_ACTIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)


def _is_plain(value: Any) -> bool:
    """Only JSON's own types, no nulls (the serializer leaves unset members out)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_plain(v) for v in value)
    return isinstance(value, str | bool | int) or (
        isinstance(value, float) and value == value  # not NaN
    )


def _plain_item_answers() -> None:

    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.serialized

    def serialized(self: Any, action_result: Any) -> Any:
        result = action_result.result
        if self._get_action() in _ITEM_ACTIONS and isinstance(result, dict) and _is_plain(result):
            headers = {"Content-Type": "application/x-amz-json-1.0", **self.response_headers}
            return 200, headers, json.dumps(result, separators=(",", ":"))
        return original(self, action_result)

    DynamoHandler.serialized = serialized  # type: ignore[method-assign]


def _plain_stream_records() -> None:
    """GetRecords answered as built: its records' images are the wire's JSON already; only
    each record's creation time is a datetime, written as the serializer writes it (epoch
    seconds, milliseconds kept)."""
    from datetime import datetime

    from botocore.utils import parse_to_aware_datetime
    from moto.core.serialize import TimestampSerializer
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    original = DynamoDBStreamsHandler.serialized

    def epoch(value: datetime) -> int | float:
        aware = parse_to_aware_datetime(value)  # type: ignore[arg-type]
        return TimestampSerializer._timestamp_unixtimestamp(aware)

    def serialized(self: Any, action_result: Any) -> Any:
        result = action_result.result
        if self._get_action() == "GetRecords" and isinstance(result, dict):
            records = []
            for record in result.get("Records", []):
                change = record.get("dynamodb", {})
                created = change.get("ApproximateCreationDateTime")
                if isinstance(created, datetime):
                    change = {**change, "ApproximateCreationDateTime": epoch(created)}
                records.append({**record, "dynamodb": change})
            answer = {**result, "Records": records}
            if _is_plain(answer):
                headers = {"Content-Type": "application/x-amz-json-1.0", **self.response_headers}
                return 200, headers, json.dumps(answer, separators=(",", ":"))
        return original(self, action_result)

    DynamoDBStreamsHandler.serialized = serialized  # type: ignore[method-assign]


_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _iam_checked(app: _WsgiApp) -> _WsgiApp:
    """moto behind the IAM check, when the local stack asks for it."""
    from devstack.iam.local import BOOK_ENV, PREFIX_ENV

    book = os.environ.get(BOOK_ENV)
    if not book:
        return app
    from pathlib import Path

    from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
    from devstack.iam.book import Book
    from devstack.iam.calls import Account
    from devstack.iam.guard import Checker, IamGuard

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    account = Account(LOCAL_REGION, LOCAL_ACCOUNT, os.environ.get(PREFIX_ENV, ""))
    return IamGuard(app, Checker(Book.load(Path(book), account)))


def _telling_made(app: _WsgiApp) -> _WsgiApp:
    """``app``, with ``GET MADE_PATH`` answered by the strict rules' counts."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != MADE_PATH:
            return app(environ, start_response)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(made()).encode()]

    return serve


def _expiring(app: _WsgiApp) -> _WsgiApp:
    """Session credentials that expire (devstack.sts_lifetime), unless turned off."""
    from devstack.sts_lifetime import CredentialLifetimes, lifetime_from_env

    lifetime = lifetime_from_env()
    return app if lifetime is None else CredentialLifetimes(app, lifetime_s=lifetime)


def _presigned_expiring(app: _WsgiApp) -> _WsgiApp:
    """Presigned S3 URLs refused past their time (devstack.presigned_urls), as the strict
    rules in force say."""
    from devstack.presigned_urls import PresignedExpiry

    return PresignedExpiry(app, enforced=lambda: in_force().s3_presigned_expiry)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.embedded_aws")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    parser.add_argument("--fd", type=int, help="serve on this inherited listening socket")
    args = parser.parse_args(argv)
    prepare_moto()
    enforce(StrictRules())
    where: dict[str, Any] = {"host": args.host, "port": args.port}
    if args.fd is not None:
        held = socket.socket(fileno=args.fd)
        where, args.port = {"sockets": [held]}, held.getsockname()[1]
    # moto builds some resource URLs (SQS queue URLs, ...) from the port it serves on.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from waitress import serve

    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app: _WsgiApp = DomainDispatcherApplication(create_backend_app)
    if os.environ.get(COUNT_ENV):
        app = CallCounter(app)
    app = _telling_made(_expiring(_presigned_expiring(_iam_checked(app))))
    serve(
        app,
        **where,
        threads=SERVER_THREADS,
        connection_limit=MAX_CONNECTIONS,
        backlog=1024,
        ident="moto",
        # Bodies are small; large S3 uploads are spooled by waitress as usual.
        channel_timeout=300,
    )


if __name__ == "__main__":
    main()
