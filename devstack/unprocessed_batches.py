"""DynamoDB's batch calls left part done in the embedded AWS, as DynamoDB may leave them.

BatchGetItem "returns a partial result if the response size limit is exceeded, the table's
provisioned throughput is exceeded, more than 1MB per partition is requested, or an internal
processing failure occurs", naming the keys it did not read in ``UnprocessedKeys``
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html);
BatchWriteItem returns the writes it did not make in ``UnprocessedItems``
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
Both ask the caller to send those again. moto reads and writes every key of a batch (it
leaves keys only past 16 MB of answer), so a caller that reads ``Responses`` and drops the
rest always found its items here, and on AWS reads some of them as missing.

Here, a ``share`` of the batches of two keys or more leave their last key (a read) or
request (a write) undone and name it as DynamoDB does, with the table's read settings. The
share is counted, not drawn (one batch in ``1 / share``), so runs repeat. A batch of one is
never left undone whole: DynamoDB answers that with ProvisionedThroughputExceededException,
which botocore's retries send again; a batch over AWS's sizes is left to be refused whole.
Off by default; on with the duplicates (``devstack.strict_aws.at_least_once``) and in the
tests that need it (``dynamodb_unprocessed_share``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devstack.counted_share import CountedShare

# AWS's most a request: keys read, writes made (bigger batches are refused whole;
# devstack.strict_aws refuses a bigger BatchWriteItem with this figure too).
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25

# The batches chosen to be left part done (devstack.strict_aws resets and reads it).
UNDONE = CountedShare()


def leave_some_undone(share: Callable[[], float]) -> None:
    """From now on ``share()`` of the DynamoDB batches leave their last key unprocessed."""
    from moto.dynamodb.responses import DynamoHandler

    batch_get = DynamoHandler.batch_get_item
    batch_write = DynamoHandler.batch_write_item

    def get(self: Any) -> Any:
        tables = dict(self.body.get("RequestItems") or {})
        keys = sum(len(t.get("Keys") or []) for t in tables.values())
        if not 2 <= keys <= BATCH_GET_MAX or not UNDONE.next(share()):
            return batch_get(self)
        name, asked = _last(tables, lambda t: t.get("Keys") or [])
        held, rest = asked["Keys"][-1], asked["Keys"][:-1]
        _without_last(self, tables, name, {**asked, "Keys": rest} if rest else None)
        answer = batch_get(self)
        undone = _answered(answer).setdefault("UnprocessedKeys", {})
        undone.setdefault(name, {**asked, "Keys": []})["Keys"].append(held)
        return answer

    def write(self: Any) -> Any:
        tables = dict(self.body.get("RequestItems") or {})
        writes = sum(len(requests) for requests in tables.values())
        if not 2 <= writes <= BATCH_WRITE_MAX or not UNDONE.next(share()):
            return batch_write(self)
        name, requests = _last(tables, lambda requests: requests)
        _without_last(self, tables, name, requests[:-1] or None)
        answer = batch_write(self)
        undone = _answered(answer).setdefault("UnprocessedItems", {})
        undone.setdefault(name, []).append(requests[-1])
        return answer

    DynamoHandler.batch_get_item = get  # type: ignore[method-assign]
    DynamoHandler.batch_write_item = write  # type: ignore[method-assign]


def _answered(answer: Any) -> dict[str, Any]:
    """The body of moto's answer (its ``ActionResult``), before it is serialized."""
    body: dict[str, Any] = answer.result
    return body


def _last(tables: dict[str, Any], entries: Callable[[Any], list[Any]]) -> tuple[str, Any]:
    """The last table of the request that has entries, and what was asked of it."""
    name = [n for n, asked in tables.items() if entries(asked)][-1]
    return name, tables[name]


def _without_last(handler: Any, tables: dict[str, Any], name: str, kept: Any) -> None:
    """The request moto answers: ``name``'s entries replaced by ``kept`` (None: none left,
    the table left out, as a request may not name a table with nothing to do)."""
    rest = {n: asked for n, asked in tables.items() if n != name}
    if kept is not None:
        rest[name] = kept
    handler.body = {**handler.body, "RequestItems": rest}
