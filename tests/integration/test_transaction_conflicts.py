"""Transactions that meet (``devstack.ongoing_transactions``, ``write_together``).

AWS cancels a ``TransactWriteItems`` that names an item of another transaction still under
way (``TransactionConflict``). The embedded AWS does the same while a transaction is held;
moto as it is applies each at once, so two writers of one item never meet. Our writers send
a cancelled transaction again: a tenant's usage is counted for every attempt, however many
end together.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.ongoing_transactions import under_way
from devstack.provision import Provisioned
from devstack.strict_aws import LENIENT, StrictRules, rules_in_force
from pagefleet.adapters.dynamodb.codec import cancellation_codes
from pagefleet.adapters.dynamodb.usage import DynamoUsageStore
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.usage import AttemptUsage
from tests.conftest import aws_client

HELD = StrictRules(queue_settle_s=0, dynamodb_transaction_hold_s=0.05)


@pytest.fixture
def db(provisioned: Provisioned) -> Any:
    return aws_client("dynamodb")


def _add(table: str, sk: str) -> list[Any]:
    return [
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": "T#conflicts"}, "sk": {"S": sk}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
    ]


def _count(db: Any, table: str, sk: str) -> int:
    item = db.get_item(
        TableName=table, Key={"pk": {"S": "T#conflicts"}, "sk": {"S": sk}}, ConsistentRead=True
    ).get("Item")
    return int(item["n"]["N"]) if item else 0


@contextlib.contextmanager
def _while_one_is_under_way(first: Callable[[], Any]) -> Iterator[None]:
    """Start ``first`` on a thread; yield once its transaction holds its items; join it."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            first()
        except BaseException as exc:  # surfaced below
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while under_way() == 0 and thread.is_alive():
        assert time.monotonic() < deadline, "the first transaction never got under way"
        time.sleep(0.001)
    yield
    thread.join(timeout=10)
    assert not failed, failed


@pytest.mark.parametrize(
    ("second", "code"),
    [("transaction", "TransactionCanceledException"), ("plain", "TransactionConflictException")],
)
def test_a_write_meeting_a_transaction_under_way_is_refused_for_the_conflict(
    db: Any, provisioned: Provisioned, second: str, code: str
) -> None:
    # A plain boto3 client: nothing sends the refused write again.
    table = provisioned.tenants_table
    first = lambda: db.transact_write_items(TransactItems=_add(table, "A"))  # noqa: E731
    both = [*_add(table, "B"), *_add(table, "A")]
    write: Callable[[], Any] = (
        (lambda: db.transact_write_items(TransactItems=both))
        if second == "transaction"
        else (lambda: db.update_item(**_add(table, "A")[0]["Update"]))
    )
    longer = HELD.model_copy(update={"dynamodb_transaction_hold_s": 0.5})
    with (
        rules_in_force(longer),
        _while_one_is_under_way(first),
        pytest.raises(ClientError) as refused,
    ):
        write()
    assert refused.value.response["Error"]["Code"] == code
    if second == "transaction":
        assert cancellation_codes(refused.value) == ["None", "TransactionConflict"]
    assert _count(db, table, "A") == 1  # the first landed
    assert _count(db, table, "B") == 0  # the cancelled one wrote nothing


def test_transactions_one_after_another_or_on_other_items_do_not_meet(
    db: Any, provisioned: Provisioned
) -> None:
    table = provisioned.tenants_table
    with rules_in_force(HELD):
        db.transact_write_items(TransactItems=_add(table, "A"))
        db.transact_write_items(TransactItems=_add(table, "A"))
        first = lambda: db.transact_write_items(TransactItems=_add(table, "A"))  # noqa: E731
        with _while_one_is_under_way(first):
            db.transact_write_items(TransactItems=_add(table, "B"))
    assert (_count(db, table, "A"), _count(db, table, "B")) == (3, 1)


def test_lenient_moto_lets_two_writers_of_one_item_never_meet(
    db: Any, provisioned: Provisioned
) -> None:
    table = provisioned.tenants_table
    with rules_in_force(LENIENT):
        threads = [
            threading.Thread(target=lambda: db.transact_write_items(TransactItems=_add(table, "A")))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert _count(db, table, "A") == 4


def test_our_clients_send_a_plain_write_that_met_a_transaction_again(
    db: Any, provisioned: Provisioned
) -> None:
    table = provisioned.tenants_table
    ours = RUNTIME.client("dynamodb")
    first = lambda: db.transact_write_items(TransactItems=_add(table, "A"))  # noqa: E731
    with rules_in_force(HELD), _while_one_is_under_way(first):
        ours.update_item(**_add(table, "A")[0]["Update"])
    assert _count(db, table, "A") == 2


def _usage(job_id: str) -> AttemptUsage:
    return AttemptUsage(
        tenant_id="t-busy",
        job_id=job_id,
        attempt=1,
        day="2026-12-06",
        first_attempt=True,
        browser_seconds=2.0,
    )


def test_two_attempts_ending_together_are_both_counted(provisioned: Provisioned) -> None:
    # Both add to the tenant's day in a transaction: the second meets the first, and is
    # sent again (on the code before it, the second raised and its usage was lost).
    store = DynamoUsageStore(aws_client("dynamodb"), provisioned.usage_table)
    with rules_in_force(HELD), _while_one_is_under_way(lambda: store.record(_usage("j1"))):
        assert store.record(_usage("j2")) is True
    [day] = [r for r in store.days("t-busy", "2026-12-06", "2026-12-06") if r.workflow == "*"]
    assert (day.jobs, day.attempts, day.browser_seconds) == (2, 2, 4.0)
    assert store.record(_usage("j2")) is False  # once per attempt, as before
