"""Tenants and their API keys (stored by SHA-256 only), and each tenant's policy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pagefleet.adapters.dynamodb.codec import deserialize, read_item, serialize
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.ports import ApiKeyRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

KEY_SK = "KEY"  # an API key item's sort key (its partition: KEY#<sha-256>)


def _key_record(data: Mapping[str, Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=data["key_id"],
        tenant_id=data["tenant_id"],
        name=data.get("name", ""),
        created_at=data.get("created_at", ""),
        revoked=bool(data.get("revoked", False)),
        admin=bool(data.get("admin", False)),
    )


class DynamoTenantStore:
    """API keys stored by their SHA-256 only; the plaintext is shown once at creation."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def put_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=serialize(
                {
                    "pk": f"KEY#{key_hash}",
                    "sk": KEY_SK,
                    "key_id": record.key_id,
                    "tenant_id": record.tenant_id,
                    "name": record.name,
                    "created_at": record.created_at,
                    "revoked": record.revoked,
                    "admin": record.admin,
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def find_key(self, key_hash: str) -> ApiKeyRecord | None:
        # A key made a moment ago is found: a miss is read again, consistently (an
        # authorizer's "no" is cached, so a stale miss would refuse a new key for minutes).
        key = serialize({"pk": f"KEY#{key_hash}", "sk": KEY_SK})
        item = read_item(self._db, self._table, key)
        return None if item is None else _key_record(deserialize(item))

    def keys_of(self, tenant_id: str) -> list[tuple[str, ApiKeyRecord]]:
        # The by_tenant index also holds every other item that names the tenant (audit
        # records, for one): the sort key picks the key items in the query itself.
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": "by_tenant",
            "KeyConditionExpression": "tenant_id = :t AND sk = :key",
            "ExpressionAttributeValues": serialize({":t": tenant_id, ":key": KEY_SK}),
        }
        out = []
        while True:
            resp = self._db.query(**kwargs)
            for item in resp.get("Items", []):
                data = deserialize(item)
                out.append((data["pk"].removeprefix("KEY#"), _key_record(data)))
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def get_policy(self, tenant_id: str) -> TenantPolicy:
        """The tenant's policy; the defaults when none was ever stored."""
        resp = self._db.get_item(
            TableName=self._table,
            Key=serialize({"pk": f"TENANT#{tenant_id}", "sk": "POLICY"}),
            ConsistentRead=True,
        )
        if "Item" not in resp:
            return TenantPolicy()
        data = deserialize(resp["Item"])
        return TenantPolicy.model_validate(data.get("policy") or {})

    def put_policy(self, tenant_id: str, policy: TenantPolicy) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=serialize(
                {
                    "pk": f"TENANT#{tenant_id}",
                    "sk": "POLICY",
                    "policy": policy.model_dump(mode="json"),
                }
            ),
        )

    def revoke(self, key_hash: str) -> None:
        self._db.update_item(
            TableName=self._table,
            Key=serialize({"pk": f"KEY#{key_hash}", "sk": KEY_SK}),
            UpdateExpression="SET revoked = :t",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=serialize({":t": True}),
        )
