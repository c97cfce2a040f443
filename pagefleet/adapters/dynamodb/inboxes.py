"""Which workers' inboxes are alive, in the jobs table (pagefleet.browsing.inbox).

One item per inbox (``pk = INBOX``, ``sk = <queue name>``) with the time its worker last
promised to be alive until; the table's TTL removes it a day after. A worker renews it while
it runs and writes it ended (``until = 0``) when it stops; the sweeper deletes an inbox with
no live item (its worker was killed: nothing else would).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from pagefleet.adapters.dynamodb.codec import deserialize, serialize

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PK = "INBOX"
# The item outlives its last promise by this long (then TTL removes it).
KEPT_S = 24 * 3600


class DynamoInboxRegistry:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def renew(self, name: str, *, until: float) -> None:
        item = {
            "pk": PK,
            "sk": name,
            "until": Decimal(str(round(until, 3))),
            "expires_at": int(until) + KEPT_S,
        }
        self._db.put_item(TableName=self._table, Item=serialize(item))

    def drop(self, name: str) -> None:
        self.renew(name, until=0)

    def alive(self, name: str, *, now: float) -> bool:
        item = self._db.get_item(
            TableName=self._table, Key=serialize({"pk": PK, "sk": name}), ConsistentRead=True
        ).get("Item")
        return item is not None and float(deserialize(item)["until"]) > now
