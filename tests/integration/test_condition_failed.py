"""One reading of "the condition failed" (``codec.condition_failed``), held to the refusals
the embedded AWS really answers: a single write's and a transaction's, and the errors that
are not a failed condition."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import condition_failed
from tests.conftest import aws_client


@pytest.fixture
def table(moto_endpoint: str) -> Iterator[str]:
    """A table of its own (no moto reset): one item, ``pk = taken``, is there."""
    db = aws_client("dynamodb")
    name = f"condition-{uuid.uuid4().hex[:12]}"
    db.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    db.put_item(TableName=name, Item={"pk": {"S": "taken"}, "v": {"N": "1"}})
    yield name
    db.delete_table(TableName=name)


def _refusal(call: Callable[[], Any]) -> ClientError:
    with pytest.raises(ClientError) as refused:
        call()
    return refused.value


def _put_new(table: str, pk: str) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": table,
            "Item": {"pk": {"S": pk}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def test_a_single_writes_refused_condition_is_a_failed_condition(table: str) -> None:
    db = aws_client("dynamodb")
    put = _refusal(lambda: db.put_item(**_put_new(table, "taken")["Put"]))
    update = _refusal(
        lambda: db.update_item(
            TableName=table,
            Key={"pk": {"S": "taken"}},
            UpdateExpression="SET v = :two",
            ConditionExpression="v = :zero",
            ExpressionAttributeValues={":two": {"N": "2"}, ":zero": {"N": "0"}},
        )
    )
    assert condition_failed(put) and condition_failed(update)


def test_a_transaction_cancelled_by_a_condition_names_the_item_that_failed(table: str) -> None:
    db = aws_client("dynamodb")
    refused = _refusal(
        lambda: db.transact_write_items(
            TransactItems=[_put_new(table, "fresh"), _put_new(table, "taken")]
        )
    )
    assert refused.response["Error"]["Code"] == "TransactionCanceledException"
    assert condition_failed(refused)
    assert condition_failed(refused, item=1)
    assert not condition_failed(refused, item=0)  # the fresh item's condition held

    # An SDK that leaves the property out still has the reasons, in order, in the message.
    refused.response.pop("CancellationReasons")
    assert condition_failed(refused, item=1) and not condition_failed(refused, item=0)


def test_errors_that_are_not_a_failed_condition_are_not_read_as_one(table: str) -> None:
    db = aws_client("dynamodb")
    no_table = _refusal(lambda: db.put_item(**_put_new(f"{table}-gone", "x")["Put"]))
    # Two operations on one item: DynamoDB rejects the request, no condition is evaluated.
    invalid = _refusal(
        lambda: db.transact_write_items(
            TransactItems=[_put_new(table, "same"), _put_new(table, "same")]
        )
    )
    assert not condition_failed(no_table)
    assert not condition_failed(invalid)


def test_a_transaction_cancelled_by_a_conflict_did_not_fail_a_condition() -> None:
    """moto never answers a conflict; this is the shape DynamoDB documents for one
    (TransactWriteItems, TransactionCanceledException: a reason per item, in order)."""
    conflict = ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
        },
        "TransactWriteItems",
    )
    assert not condition_failed(conflict)
    assert not condition_failed(conflict, item=1)
