"""``write_together``: a transaction cancelled only by another one under way is sent again;
a condition's refusal, or any other error, is the answer at once."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from pagefleet.adapters.client_config import after_a_conflict
from pagefleet.adapters.dynamodb.transactions import CONFLICT_TRIES, write_together


def _cancelled(*codes: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": code} for code in codes],
        },
        "TransactWriteItems",
    )


class Db:
    def __init__(self, *answers: ClientError | None) -> None:
        self.answers = list(answers)
        self.sent: list[Any] = []

    def transact_write_items(self, TransactItems: list[Any]) -> None:
        self.sent.append(TransactItems)
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer


def test_a_transaction_that_met_another_is_sent_again_until_it_lands() -> None:
    db, waits = Db(_cancelled("None", "TransactionConflict"), _cancelled("TransactionConflict")), []
    write_together(db, [{"Put": {}}, {"Update": {}}], sleep=waits.append)
    assert len(db.sent) == 3 and db.sent[0] == db.sent[2]
    assert len(waits) == 2 and all(w > 0 for w in waits)


@pytest.mark.parametrize(
    "refusal",
    [
        _cancelled("ConditionalCheckFailed", "None"),
        _cancelled("ConditionalCheckFailed", "TransactionConflict"),  # a refusal: the answer
        _cancelled("ValidationError"),
        ClientError({"Error": {"Code": "ValidationException"}}, "TransactWriteItems"),
    ],
)
def test_any_other_refusal_is_the_answer_at_once(refusal: ClientError) -> None:
    db = Db(refusal)
    with pytest.raises(ClientError) as raised:
        write_together(db, [{"Put": {}}], sleep=lambda s: None)
    assert raised.value is refusal and len(db.sent) == 1


def test_conflicts_that_outlast_every_try_raise_the_last() -> None:
    db = Db(*[_cancelled("TransactionConflict") for _ in range(CONFLICT_TRIES + 1)])
    with pytest.raises(ClientError):
        write_together(db, [{"Put": {}}], sleep=lambda s: None)
    assert len(db.sent) == CONFLICT_TRIES


def _answer(code: str) -> tuple[None, dict[str, Any]]:
    return None, {"Error": {"Code": code}}


def test_a_plain_write_that_met_a_transaction_is_sent_again_for_a_while() -> None:
    conflict = _answer("TransactionConflictException")
    waits = [after_a_conflict(conflict, attempts=n) for n in range(1, CONFLICT_TRIES)]
    assert all(w is not None and 0 < w <= 0.32 for w in waits)
    assert after_a_conflict(conflict, attempts=CONFLICT_TRIES) is None  # tries spent
    assert after_a_conflict(_answer("ConditionalCheckFailedException"), attempts=1) is None
    assert after_a_conflict(None, attempts=1) is None  # no answer: botocore's own retries
