"""DynamoDB's batch calls left part done (``devstack.unprocessed_batches``): the rule on,
against real boto3 calls, and off (moto as it is, which does every key); and the batch
readers and writers of ours finishing what DynamoDB left."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.provision import Provisioned
from devstack.strict_aws import LENIENT, StrictRules, at_least_once, rules_in_force
from pagefleet.adapters.dynamodb.batches import get_all, write_all
from tests.conftest import aws_client

# Only the rule under test, every batch of two keys or more.
EVERY = StrictRules(queue_settle_s=0, dynamodb_unprocessed_share=1)


def _key(n: int) -> dict[str, Any]:
    return {"pk": {"S": "T#u"}, "sk": {"S": f"k{n}"}}


def _puts(numbers: range) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {**_key(i), "n": {"N": str(i)}}}} for i in numbers]


@pytest.fixture
def table(provisioned: Provisioned) -> str:
    db = aws_client("dynamodb")
    with rules_in_force(LENIENT):
        db.batch_write_item(RequestItems={provisioned.jobs_table: _puts(range(3))})
    return provisioned.jobs_table


def test_the_share_is_off_by_default_and_on_with_the_duplicates() -> None:
    assert StrictRules().dynamodb_unprocessed_share == 0
    assert at_least_once().dynamodb_unprocessed_share == at_least_once().sqs_duplicate_share > 0


def test_a_batch_read_leaves_its_last_key_unprocessed_with_the_tables_settings(
    table: str,
) -> None:
    db = aws_client("dynamodb")
    asked = {table: {"Keys": [_key(0), _key(1), _key(2)], "ConsistentRead": True}}
    with rules_in_force(EVERY):
        answer = db.batch_get_item(RequestItems=asked)
    read = sorted(item["sk"]["S"] for item in answer["Responses"][table])
    assert read == ["k0", "k1"]
    assert answer["UnprocessedKeys"] == {table: {"Keys": [_key(2)], "ConsistentRead": True}}
    with rules_in_force(EVERY):  # sent again, as AWS asks: read
        again = db.batch_get_item(RequestItems=answer["UnprocessedKeys"])
    assert [item["sk"]["S"] for item in again["Responses"][table]] == ["k2"]
    with rules_in_force(LENIENT):  # moto as it is reads every key
        whole = db.batch_get_item(RequestItems=asked)
    assert len(whole["Responses"][table]) == 3 and not whole["UnprocessedKeys"]


def test_a_batch_write_leaves_its_last_write_unmade(provisioned: Provisioned) -> None:
    db, table = aws_client("dynamodb"), provisioned.jobs_table
    with rules_in_force(EVERY):
        answer = db.batch_write_item(RequestItems={table: _puts(range(4, 7))})
    assert answer["UnprocessedItems"] == {table: _puts(range(6, 7))}
    assert "Item" in db.get_item(TableName=table, Key=_key(5), ConsistentRead=True)
    assert "Item" not in db.get_item(TableName=table, Key=_key(6), ConsistentRead=True)
    with rules_in_force(LENIENT):
        assert not db.batch_write_item(RequestItems={table: _puts(range(7, 9))})["UnprocessedItems"]
    assert "Item" in db.get_item(TableName=table, Key=_key(8), ConsistentRead=True)


def test_a_batch_of_one_is_done_and_a_share_counts_batches(table: str) -> None:
    db = aws_client("dynamodb")
    with rules_in_force(EVERY):
        one = db.batch_get_item(RequestItems={table: {"Keys": [_key(0)]}})
    assert len(one["Responses"][table]) == 1 and not one["UnprocessedKeys"]
    pair = {table: {"Keys": [_key(0), _key(1)]}}
    with rules_in_force(StrictRules(queue_settle_s=0, dynamodb_unprocessed_share=0.5)):
        left = [bool(db.batch_get_item(RequestItems=pair)["UnprocessedKeys"]) for _ in range(6)]
    assert left == [False, True] * 3


def test_batches_over_awss_sizes_are_still_refused_whole(provisioned: Provisioned) -> None:
    db, table = aws_client("dynamodb"), provisioned.jobs_table
    with rules_in_force(EVERY):
        with pytest.raises(ClientError, match="less than or equal to 25"):
            db.batch_write_item(RequestItems={table: _puts(range(10, 36))})
        with pytest.raises(ClientError, match="100"):
            db.batch_get_item(RequestItems={table: {"Keys": [_key(i) for i in range(101)]}})


def test_our_batch_readers_and_writers_finish_what_is_left(table: str) -> None:
    db = aws_client("dynamodb")
    with rules_in_force(EVERY):
        write_all(db, table, _puts(range(50, 90)))
        found = get_all(db, table, [_key(i) for i in range(50, 90)])
    assert sorted(int(item["n"]["N"]) for item in found) == list(range(50, 90))
