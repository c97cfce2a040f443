"""Named workflow versions in the jobs table, under their tenant's partition.

``WFHEAD#<name>`` holds the latest version number; ``WF#<name>#<version, 9 digits>`` holds
each immutable version. A new version is one transaction: the head moves from N-1 to N
only if it still says N-1, and version N is written only if it does not exist, so two
concurrent pushes can never both become version N.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import condition_failed, deserialize, serialize, tenant_pk
from pagefleet.adapters.dynamodb.transactions import write_together
from pagefleet.specs.stored import STORED
from pagefleet.workflow.versions import VersionTaken, WorkflowDefinition, WorkflowVersion

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def head_sk(name: str) -> str:
    return f"WFHEAD#{name}"


def version_sk(name: str, version: int) -> str:
    return f"WF#{name}#{version:09d}"


class DynamoWorkflowStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def put_version(self, tenant_id: str, record: WorkflowVersion) -> None:
        pk = tenant_pk(tenant_id)
        if record.version == 1:
            head_condition = "attribute_not_exists(pk)"
            values: dict[str, Any] = {":v": 1, ":n": record.name}
        else:
            head_condition = "latest = :prev"
            values = {":v": record.version, ":prev": record.version - 1, ":n": record.name}
        item = {
            "pk": pk,
            "sk": version_sk(record.name, record.version),
            "name": record.name,
            "version": record.version,
            "definition": record.definition.model_dump_json(exclude_none=True),
            "created_at": record.created_at,
        }
        items: Any = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": serialize({"pk": pk, "sk": head_sk(record.name)}),
                    "UpdateExpression": "SET latest = :v, #name = :n",
                    "ConditionExpression": head_condition,
                    "ExpressionAttributeNames": {"#name": "name"},
                    "ExpressionAttributeValues": serialize(values),
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": serialize(item),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        try:
            write_together(self._db, items)
        except ClientError as exc:
            if condition_failed(exc):
                raise VersionTaken(record.version) from exc
            raise

    def latest(self, tenant_id: str, name: str) -> WorkflowVersion | None:
        resp = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=serialize(
                {":pk": tenant_pk(tenant_id), ":prefix": f"WF#{name}#"}
            ),
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = resp.get("Items", [])
        return _version(deserialize(items[0])) if items else None

    def get(self, tenant_id: str, name: str, version: int) -> WorkflowVersion | None:
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": version_sk(name, version)}),
            ConsistentRead=True,
        )
        return _version(deserialize(resp["Item"])) if "Item" in resp else None

    def versions(self, tenant_id: str, name: str) -> list[int]:
        out: list[int] = []
        for item in self._query_all(tenant_id, f"WF#{name}#", projection="version"):
            out.append(int(item["version"]))
        return sorted(out)

    def names(self, tenant_id: str) -> list[tuple[str, int]]:
        heads = self._query_all(tenant_id, "WFHEAD#", projection="#name, latest")
        return sorted((str(h["name"]), int(h["latest"])) for h in heads)

    def _query_all(self, tenant_id: str, prefix: str, *, projection: str) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": serialize(
                {":pk": tenant_pk(tenant_id), ":prefix": prefix}
            ),
            "ProjectionExpression": projection,
        }
        if "#name" in projection:
            kwargs["ExpressionAttributeNames"] = {"#name": "name"}
        out: list[dict[str, Any]] = []
        while True:
            resp = self._db.query(**kwargs)
            out += [deserialize(i) for i in resp.get("Items", [])]
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def _version(data: dict[str, Any]) -> WorkflowVersion:
    return WorkflowVersion(
        name=str(data["name"]),
        version=int(data["version"]),
        # Read as written: a version saved before a rule still reads (a job made from it is
        # checked as new).
        definition=WorkflowDefinition.model_validate(
            json.loads(data["definition"]), context=STORED
        ),
        created_at=str(data["created_at"]),
    )
