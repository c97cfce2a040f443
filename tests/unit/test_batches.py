"""DynamoDB's batch calls asked again for what they left undone; what stays undone is a
named error the API answers 503 with Retry-After, never a partial answer or a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest

from functions.api.errors import from_domain
from pagefleet.adapters.dynamodb import batches
from pagefleet.errors import StoreBusy


class Throttled:
    """A DynamoDB client that reads and writes every key but the last, every time."""

    def __init__(self) -> None:
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        [(table, asked)] = RequestItems.items()
        *read, left = asked["Keys"]
        return {
            "Responses": {table: read},
            "UnprocessedKeys": {table: {**asked, "Keys": [left]}},
        }

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        [(table, requests)] = RequestItems.items()
        return {"UnprocessedItems": {table: requests[-1:]}}


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches, "BACKOFF_S", (0.0,) * len(batches.BACKOFF_S))


def test_a_key_left_unread_every_time_is_a_busy_store_not_a_missing_item() -> None:
    db = Throttled()
    keys = [{"pk": {"S": "k"}, "sk": {"S": str(n)}} for n in range(3)]
    with pytest.raises(StoreBusy, match="1 items of t were left unread"):
        batches.get_all(db, "t", keys)  # type: ignore[arg-type]
    assert db.calls == len(batches.BACKOFF_S)  # asked again, as AWS advises, then given up


def test_a_write_left_unmade_every_time_is_a_busy_store() -> None:
    db = Throttled()
    puts = [{"PutRequest": {"Item": {"pk": {"S": str(n)}}}} for n in range(3)]
    with pytest.raises(StoreBusy, match="1 writes to t were left unprocessed"):
        batches.write_all(db, "t", puts)  # type: ignore[arg-type]
    assert db.calls == len(batches.BACKOFF_S)


def test_the_api_answers_a_busy_store_503_with_retry_after() -> None:
    answer = from_domain(StoreBusy("2 items of jobs were left unread; retry"))
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    assert json.loads(answer.body or "{}")["error"]["code"] == "store_busy"
