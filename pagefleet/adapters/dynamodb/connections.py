"""WebSocket connections, their rooms, tickets and send windows in the connections table.

Items (``CONNECTIONS_TABLE`` in ``pagefleet.specs.resources``):

- ``pk = CONN#<id>, sk = META``: tenant, key id, rooms followed (a string set), the send
  window (``win``: epoch second, ``sent``: messages in it, ``jw``: jobs whose events went
  out in it) and, while it follows nothing, ``idle_pk``/``idle_since`` (the sparse ``idle``
  index the reaper reads);
- ``pk = ROOM#<tenant>#<job id or *>, sk = <connection id>``: one per follower, so the
  stream reader finds a job's followers with one query per room;
- ``pk = TICKET#<sha256 of the ticket>, sk = TICKET``: a single-use connect ticket;
- ``pk = FOLLOWS#<tenant>, sk = FOLLOWS``: how many room items the tenant's connections made
  (``all`` for the tenant's ``*`` room, ``jobs`` for job rooms), changed in the same
  transaction as the room item, so the stream reader asks once per batch whether any job of
  the tenant is followed at all and skips the room queries when none is. A room item gone by
  TTL leaves its count behind: the count can be too high (a query that finds nothing), never
  too low.

Every item has ``expires_at`` (TTL): a connection outlives API Gateway's 2 hours by minutes
only, even when its ``$disconnect`` never came.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.batches import get_all
from pagefleet.adapters.dynamodb.codec import condition_failed, deserialize, serialize
from pagefleet.adapters.dynamodb.transactions import write_together
from pagefleet.live.ports import Connection, SubscriptionLimit, Ticket

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

META = "META"
IDLE = "idle"
FOLLOWS = "FOLLOWS"


def conn_pk(connection_id: str) -> str:
    return f"CONN#{connection_id}"


def room_pk(tenant_id: str, room: str) -> str:
    return f"ROOM#{tenant_id}#{room}"


def follows_key(tenant_id: str) -> dict[str, Any]:
    return serialize({"pk": f"FOLLOWS#{tenant_id}", "sk": FOLLOWS})


def _count_name(room: str) -> str:
    return "all" if room == "*" else "jobs"


def _seconds(value: float) -> Decimal:
    """Epoch seconds to the millisecond, as DynamoDB numbers (boto3 takes no floats)."""
    return Decimal(str(round(value, 3)))


def _connection(data: dict[str, Any]) -> Connection:
    return Connection(
        connection_id=str(data["pk"]).removeprefix("CONN#"),
        tenant_id=str(data["tenant_id"]),
        key_id=str(data.get("key_id", "")),
        connected_at=float(data.get("connected_at", 0)),
        expires_at=int(data.get("expires_at", 0)),
        rooms=frozenset(str(r) for r in data.get("rooms") or ()),
        window=int(data.get("win", 0)),
        sent=int(data.get("sent", 0)),
        window_jobs=frozenset(str(j) for j in (data.get("jw") or {})),
    )


class DynamoConnections:
    """``Connections`` over the connections table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def _meta_key(self, connection_id: str) -> dict[str, Any]:
        return serialize({"pk": conn_pk(connection_id), "sk": META})

    def open(
        self, connection_id: str, *, tenant_id: str, key_id: str, now: float, expires_at: int
    ) -> Connection:
        self._db.put_item(
            TableName=self._table,
            Item=serialize(
                {
                    "pk": conn_pk(connection_id),
                    "sk": META,
                    "tenant_id": tenant_id,
                    "key_id": key_id,
                    "connected_at": _seconds(now),
                    "expires_at": expires_at,
                    "idle_pk": IDLE,
                    "idle_since": _seconds(now),
                    "win": 0,
                    "sent": 0,
                }
            ),
        )
        return Connection(connection_id, tenant_id, key_id, now, expires_at)

    def get(self, connection_id: str) -> Connection | None:
        resp = self._db.get_item(
            TableName=self._table, Key=self._meta_key(connection_id), ConsistentRead=True
        )
        return _connection(deserialize(resp["Item"])) if "Item" in resp else None

    def subscribe(self, connection_id: str, room: str, *, max_rooms: int) -> bool:
        current = self.get(connection_id)
        if current is None:
            return False
        if room in current.rooms:
            return True
        if len(current.rooms) >= max_rooms:
            raise SubscriptionLimit(f"a connection follows at most {max_rooms} rooms")
        try:
            write_together(
                self._db,
                [
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": self._meta_key(connection_id),
                            "UpdateExpression": "ADD rooms :r REMOVE idle_pk, idle_since",
                            "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": serialize({":r": {room}}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": serialize(
                                {
                                    "pk": room_pk(current.tenant_id, room),
                                    "sk": connection_id,
                                    "expires_at": current.expires_at,
                                }
                            ),
                        }
                    },
                    self._count(current.tenant_id, room, +1),
                ],
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False  # disconnected meanwhile
            raise
        return True

    def unsubscribe(self, connection_id: str, room: str, *, now: float) -> bool:
        current = self.get(connection_id)
        if current is None or room not in current.rooms:
            return False
        resp = self._db.update_item(
            TableName=self._table,
            Key=self._meta_key(connection_id),
            UpdateExpression="DELETE rooms :r",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=serialize({":r": {room}}),
            ReturnValues="ALL_NEW",
        )
        self._leave(current.tenant_id, room, connection_id)
        if not deserialize(resp["Attributes"]).get("rooms"):
            # Following nothing again: the idle clock starts (unless it joined a room since).
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=self._meta_key(connection_id),
                    UpdateExpression="SET idle_pk = :i, idle_since = :t",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(rooms)",
                    ExpressionAttributeValues=serialize({":i": IDLE, ":t": _seconds(now)}),
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
        return True

    def close(self, connection_id: str) -> None:
        current = self.get(connection_id)
        if current is not None:
            for room in current.rooms:
                self._leave(current.tenant_id, room, connection_id)
        self._db.delete_item(TableName=self._table, Key=self._meta_key(connection_id))

    def _count(self, tenant_id: str, room: str, delta: int) -> TransactWriteItemTypeDef:
        """The transaction item that moves the tenant's count of ``room``'s kind."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": follows_key(tenant_id),
                "UpdateExpression": "ADD #n :d",
                "ExpressionAttributeNames": {"#n": _count_name(room)},
                "ExpressionAttributeValues": serialize({":d": delta}),
            }
        }

    def _leave(self, tenant_id: str, room: str, connection_id: str) -> None:
        """Delete the room item and count it out, once: a room item already gone (a
        concurrent close, TTL) is not counted out again."""
        try:
            write_together(
                self._db,
                [
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": serialize({"pk": room_pk(tenant_id, room), "sk": connection_id}),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    self._count(tenant_id, room, -1),
                ],
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def followers(self, tenant_id: str, job_ids: Sequence[str]) -> dict[str, list[Connection]]:
        counts = self._db.get_item(
            TableName=self._table, Key=follows_key(tenant_id), ConsistentRead=True
        ).get("Item")
        follows = deserialize(counts) if counts else {}
        everything = self._room(tenant_id, "*") if follows.get("all", 0) > 0 else []
        by_job = {
            job_id: self._room(tenant_id, job_id) if follows.get("jobs", 0) > 0 else []
            for job_id in dict.fromkeys(job_ids)
        }
        found = self._metas(tenant_id, [*everything, *(c for ids in by_job.values() for c in ids)])
        # A room item whose connection is gone (TTL lag) is skipped; order as followed.
        out = {}
        for job_id, ids in by_job.items():
            unique = dict.fromkeys([*ids, *everything])
            if following := [found[c] for c in unique if c in found]:
                out[job_id] = following
        return out

    def _room(self, tenant_id: str, room: str) -> list[str]:
        ids: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": serialize({":pk": room_pk(tenant_id, room)}),
            "ConsistentRead": True,
        }
        while True:
            resp = self._db.query(**kwargs)
            ids += [str(deserialize(i)["sk"]) for i in resp.get("Items", [])]
            if not resp.get("LastEvaluatedKey"):
                return ids
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def _metas(self, tenant_id: str, ids: list[str]) -> dict[str, Connection]:
        """The tenant's connections among ``ids`` (by id), read in batches."""
        unique = list(dict.fromkeys(ids))
        items = get_all(self._db, self._table, [self._meta_key(c) for c in unique])
        found = {c.connection_id: c for c in (_connection(deserialize(i)) for i in items)}
        return {c: found[c] for c in unique if c in found and found[c].tenant_id == tenant_id}

    def idle(self, since_before: float, limit: int = 100) -> list[str]:
        resp = self._db.query(
            TableName=self._table,
            IndexName="idle",
            KeyConditionExpression="idle_pk = :i AND idle_since < :t",
            ExpressionAttributeValues=serialize({":i": IDLE, ":t": _seconds(since_before)}),
            Limit=limit,
        )
        return [str(deserialize(i)["pk"]).removeprefix("CONN#") for i in resp.get("Items", [])]

    def following(self) -> list[Connection]:
        # A Scan: the table holds live connections only (each gone within API Gateway's
        # 2 hours, by TTL at the latest), read once a minute by the reaper.
        out: list[Connection] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "sk = :meta AND attribute_exists(rooms)",
            "ExpressionAttributeValues": serialize({":meta": META}),
        }
        while True:
            resp = self._db.scan(**kwargs)
            out += [_connection(deserialize(i)) for i in resp.get("Items", [])]
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def reserve(self, seen: Connection, *, window: int, count: int, jobs: frozenset[str]) -> bool:
        names = {f"#j{i}": job for i, job in enumerate(sorted(jobs))}
        values: dict[str, Any] = {":w": window, ":n": count}
        if seen.window == window:
            # Same second: only if nobody sent meanwhile, and no job's events went out yet.
            values[":seen"] = seen.sent
            condition = "win = :w AND sent = :seen"
            update = "ADD sent :n"
            if names:
                condition += "".join(f" AND attribute_not_exists(jw.{n})" for n in names)
                update += " SET " + ", ".join(f"jw.{n} = :t" for n in names)
                values[":t"] = True
        else:
            condition = "attribute_exists(pk) AND (attribute_not_exists(win) OR win < :w)"
            update = "SET win = :w, sent = :n, jw = :jw"
            values[":jw"] = dict.fromkeys(jobs, True)
            names = {}
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._meta_key(seen.connection_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": serialize(values),
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            self._db.update_item(**kwargs)
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def put_ticket(self, ticket_hash: str, ticket: Ticket, *, expires_at: int) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=serialize(
                {
                    "pk": f"TICKET#{ticket_hash}",
                    "sk": "TICKET",
                    "tenant_id": ticket.tenant_id,
                    "key_id": ticket.key_id,
                    "expires_at": expires_at,
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def take_ticket(self, ticket_hash: str, *, now: int) -> Ticket | None:
        try:
            resp = self._db.delete_item(
                TableName=self._table,
                Key=serialize({"pk": f"TICKET#{ticket_hash}", "sk": "TICKET"}),
                ConditionExpression="attribute_exists(pk) AND expires_at > :now",
                ExpressionAttributeValues=serialize({":now": now}),
                ReturnValues="ALL_OLD",
            )
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        data = deserialize(resp.get("Attributes") or {})
        if not data:
            return None
        return Ticket(tenant_id=str(data["tenant_id"]), key_id=str(data["key_id"]))
