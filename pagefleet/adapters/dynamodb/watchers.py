"""The job store's watch marks (``pagefleet.live.watch``): which live connections watch a
job's page, and until when, in a ``watchers`` map on the job's record (connection id ->
epoch second). The worker running the job reads it with the cancel flag (and the
takeover lock, pagefleet.adapters.dynamodb.takeovers), in the one small
read it makes every second, so a job nobody watches costs nothing more; an entry past its
time is ignored, and dropped by the next watch of the job."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    job_sk,
    serialize,
    tenant_pk,
)
from pagefleet.errors import NotFound
from pagefleet.jobs.ports import RunSignals
from pagefleet.jobs.takeover import Takeover


class WatcherWrites:
    """Mixed into the DynamoDB job store (it has ``_db`` and ``_table``)."""

    _db: Any
    _table: str

    def _key(self, tenant_id: str, job_id: str) -> dict[str, Any]:
        return serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)})

    def run_signals(self, tenant_id: str, job_id: str, *, now: int) -> RunSignals:
        resp = self._db.get_item(
            TableName=self._table,
            Key=self._key(tenant_id, job_id),
            ProjectionExpression="cancel_requested_at, watchers, takeover",
        )
        item = deserialize(resp.get("Item") or {})
        watchers = item.get("watchers") or {}
        takeover = item.get("takeover")
        return RunSignals(
            cancel_requested="cancel_requested_at" in item,
            watchers=frozenset(c for c, until in watchers.items() if int(until) >= now),
            takeover=Takeover.model_validate(takeover) if isinstance(takeover, dict) else None,
        )

    def watch(
        self, tenant_id: str, job_id: str, connection_id: str, *, until: int, now: int
    ) -> None:
        key = self._key(tenant_id, job_id)
        names = {"#c": connection_id}
        # An entry in the map, when the map exists; else the map with the entry. Both are
        # conditional, so two first watchers cannot overwrite each other's entry.
        for _ in range(3):
            try:
                resp = self._db.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET watchers.#c = :u",
                    ConditionExpression="attribute_exists(watchers)",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=serialize({":u": until}),
                    ReturnValues="ALL_NEW",
                )
                self._prune(key, deserialize(resp["Attributes"]).get("watchers") or {}, now)
                return
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET watchers = :m",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(watchers)",
                    ExpressionAttributeValues=serialize({":m": {connection_id: until}}),
                )
                return
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
            found = self._db.get_item(
                TableName=self._table, Key=key, ProjectionExpression="pk", ConsistentRead=True
            )
            if "Item" not in found:
                raise NotFound(f"job {job_id} not found", job_id=job_id)
        raise RuntimeError(f"job {job_id}'s watchers kept changing; try again")

    def _prune(self, key: dict[str, Any], watchers: dict[str, Any], now: int) -> None:
        """Drop entries past their time (a watcher that went without unwatching), each
        only if it is still the one read."""
        stale = [c for c, until in watchers.items() if int(until) < now][:20]
        if not stale:
            return
        names = {f"#s{i}": c for i, c in enumerate(stale)}
        values = {f":s{i}": watchers[c] for i, c in enumerate(stale)}
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="REMOVE " + ", ".join(f"watchers.{n}" for n in names),
                ConditionExpression=" AND ".join(
                    f"watchers.#s{i} = :s{i}" for i in range(len(stale))
                ),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=serialize(values),
            )
        except ClientError as exc:
            if not condition_failed(exc):  # one came back meanwhile: kept, pruned later
                raise

    def unwatch(self, tenant_id: str, job_id: str, connection_id: str) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, job_id),
                UpdateExpression="REMOVE watchers.#c",
                ConditionExpression="attribute_exists(watchers.#c)",
                ExpressionAttributeNames={"#c": connection_id},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
