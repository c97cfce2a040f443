"""A session's command ledger in the jobs table (pagefleet.browsing.commands).

Items (``pk = SCMD#<tenant>``: each tenant's sessions' commands in a partition of their own,
apart from its jobs, so that IAM can give them to the tenant-tagged job role alone with
``dynamodb:LeadingKeys``, and deny them to the worker task roles that reach the tenant's job
items; ``sk = <session>#<sha256 of the command id>``: any caller-chosen id fits and sorts
harmlessly). Every move is a conditional write on the state before it; the jobs stream
passes these items by (it reads ``JOB#`` items only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    serialize,
    to_json,
)
from pagefleet.browsing.commands import Claim, CommandBody, CommandRecord, CommandState
from pagefleet.browsing.models import Answer
from pagefleet.specs.resources import SESSION_LEDGER_PK_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def ledger_pk(tenant_id: str) -> str:
    return f"{SESSION_LEDGER_PK_PREFIX}{tenant_id}"


# Reserved words of DynamoDB's expressions, named; each move names only those it uses.
NAMES = {"#state": "state", "#order": "order"}


def command_sk(session_id: str, command_id: str) -> str:
    return f"{session_id}#{hashlib.sha256(command_id.encode()).hexdigest()}"


class DynamoCommandLedger:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def _key(self, tenant_id: str, session_id: str, command_id: str) -> dict[str, Any]:
        return serialize({"pk": ledger_pk(tenant_id), "sk": command_sk(session_id, command_id)})

    def record(self, command: CommandRecord) -> CommandRecord:
        item = {
            "pk": ledger_pk(command.tenant_id),
            "sk": command_sk(command.session_id, command.command_id),
            "session_id": command.session_id,
            "command_id": command.command_id,
            "state": command.state.value,
            "fingerprint": command.fingerprint,
            "deadline": command.deadline,
            "created_at": command.created_at,
            "expires_at": command.expires_at,
            "body": command.body.model_dump_json(),
        }
        try:
            self._db.put_item(
                TableName=self._table,
                Item=serialize(_decimals(item)),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            found = self.get(command.tenant_id, command.session_id, command.command_id)
            if found is not None:
                return found
            raise  # pragma: no cover - the item went between the put and the read (TTL)
        return command

    def get(self, tenant_id: str, session_id: str, command_id: str) -> CommandRecord | None:
        item = self._db.get_item(
            TableName=self._table,
            Key=self._key(tenant_id, session_id, command_id),
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else _record(tenant_id, item)

    def _move(
        self,
        tenant_id: str,
        session_id: str,
        command_id: str,
        *,
        update: str,
        condition: str,
        values: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        """The item after the write; None when the condition did not hold."""
        after, _ = self._update(
            tenant_id, session_id, command_id, update=update, condition=condition, values=values
        )
        return after

    def _update(
        self,
        tenant_id: str,
        session_id: str,
        command_id: str,
        *,
        update: str,
        condition: str,
        values: Mapping[str, Any],
        why: bool = False,
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the item after the write, None when the condition did not hold; with ``why``,
        the item as it was when it did not hold, None when there was none): a refused write
        says why in the same round trip (UpdateItem's ReturnValuesOnConditionCheckFailure)."""
        refused: Any = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if why else {}
        try:
            out = self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, session_id, command_id),
                UpdateExpression=update,
                ConditionExpression=f"attribute_exists(pk) AND {condition}",
                ExpressionAttributeNames={
                    name: attr for name, attr in NAMES.items() if name in update + condition
                },
                ExpressionAttributeValues=serialize(_decimals(dict(values))),
                ReturnValues="ALL_NEW",
                **refused,
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            old: Any = exc.response.get("Item")
            return None, old or None
        return out.get("Attributes"), None

    def claim(
        self, tenant_id: str, session_id: str, command_id: str, *, now: float, order: str
    ) -> Claim:
        pending = {":pending": CommandState.PENDING.value, ":now": now}
        taken, was = self._update(
            tenant_id,
            session_id,
            command_id,
            update="SET #state = :running, #order = :order",
            condition="#state = :pending AND deadline > :now",
            values={**pending, ":running": CommandState.RUNNING.value, ":order": order},
            why=True,
        )
        if taken is not None:
            return Claim(verdict="run", record=_record(tenant_id, taken))
        # Refused: the item as it was says why, in the same round trip (not recorded yet,
        # taken, answered, or past its deadline: then expired here).
        found = None if was is None else _record(tenant_id, was)
        if found is not None and found.state is CommandState.PENDING and found.deadline <= now:
            expired = self._move(
                tenant_id,
                session_id,
                command_id,
                update="SET #state = :expired",
                condition="#state = :pending AND deadline <= :now",
                values={**pending, ":expired": CommandState.EXPIRED.value},
            )
            if expired is None:  # moved meanwhile (taken, or expired by a reader)
                found = self.get(tenant_id, session_id, command_id)
            else:
                found = _record(tenant_id, expired)
        if found is None or found.state in (CommandState.PENDING, CommandState.RUNNING):
            return Claim(verdict="unknown", record=found)
        return Claim(verdict="answered", record=found)

    def expire(self, tenant_id: str, session_id: str, command_id: str) -> CommandRecord | None:
        self._move(
            tenant_id,
            session_id,
            command_id,
            update="SET #state = :expired",
            condition="#state = :pending",
            values={
                ":pending": CommandState.PENDING.value,
                ":expired": CommandState.EXPIRED.value,
            },
        )
        return self.get(tenant_id, session_id, command_id)

    def release(self, tenant_id: str, session_id: str, command_id: str, *, order: str) -> bool:
        given = self._move(
            tenant_id,
            session_id,
            command_id,
            update="SET #state = :pending REMOVE #order",
            condition="#state = :running AND #order = :order",
            values={
                ":running": CommandState.RUNNING.value,
                ":pending": CommandState.PENDING.value,
                ":order": order,
            },
        )
        return given is not None

    def finish(
        self,
        tenant_id: str,
        session_id: str,
        command_id: str,
        answer: Answer,
        steps: list[dict[str, Any]],
    ) -> None:
        self._move(
            tenant_id,
            session_id,
            command_id,
            update="SET #state = :done, answer = :answer, steps = :steps",
            condition="#state = :running",
            values={
                ":running": CommandState.RUNNING.value,
                ":done": CommandState.DONE.value,
                ":answer": answer.model_dump_json(exclude_none=True),
                ":steps": to_json(steps),
            },
        )

    def session_commands(self, tenant_id: str, session_id: str) -> list[CommandRecord]:
        out: list[CommandRecord] = []
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": serialize(
                {":pk": ledger_pk(tenant_id), ":prefix": f"{session_id}#"}
            ),
            "ConsistentRead": True,
        }
        while True:
            page = self._db.query(**query)
            out += [_record(tenant_id, item) for item in page.get("Items", [])]
            last = page.get("LastEvaluatedKey")
            if not last:
                return out
            query["ExclusiveStartKey"] = last


def _decimals(item: dict[str, Any]) -> dict[str, Any]:
    """Floats as DynamoDB numbers (boto3's serializer takes Decimal, not float)."""
    from decimal import Decimal

    return {k: Decimal(str(v)) if isinstance(v, float) else v for k, v in item.items()}


def _record(tenant_id: str, item: Mapping[str, Any]) -> CommandRecord:
    data = deserialize(item)
    answer = data.get("answer")
    return CommandRecord(
        tenant_id=tenant_id,
        session_id=str(data["session_id"]),
        command_id=str(data["command_id"]),
        state=CommandState(str(data["state"])),
        fingerprint=str(data["fingerprint"]),
        deadline=float(data["deadline"]),
        created_at=str(data["created_at"]),
        expires_at=int(data["expires_at"]),
        order=data.get("order"),
        answer=Answer.model_validate_json(answer) if answer else None,
        steps=json.loads(data["steps"]) if data.get("steps") else [],
        body=CommandBody.model_validate_json(data["body"]) if data.get("body") else CommandBody(),
    )
