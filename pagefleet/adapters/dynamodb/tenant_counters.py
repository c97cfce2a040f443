"""A tenant's counters in the tenants table: submission bucket, queued count, running set.

Items (partition ``TENANT#<id>``, beside the tenant's policy):

- ``LIMIT#QUEUED``: the submission bucket, ``tat`` (epoch ms, see
  ``pagefleet.tenancy.bucket``), ``minute`` (epoch minute) and ``minute_count``, the
  submissions of that minute; and the queued count, ``queued``, ``version`` (bumped by every
  change of the count; a recount writes only if nothing moved meanwhile), ``recounted_at``.
  One item, so a submission's token and its queued room are one conditional write
  (``spend_and_hold``). The bucket was an item of its own (``LIMIT#BUCKET``) before
  2026-12-05: a tenant's bucket starts full once after that change (docs/decisions.md).
- ``LIMIT#RUNNING``: ``running``, a string set of job ids.

Every change is one conditional update: the table decides, so concurrent API calls and
workers never lose an update or let a cap slip. None of these items has a ``tenant_id``
attribute, so the ``by_tenant`` index (API keys) never lists them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.batches import get_all
from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    serialize,
    status_pk,
    tenant_pk,
)
from pagefleet.jobs.states import JobStatus
from pagefleet.tenancy.ports import UNSTARTED, CounterView, SlotTake, SpendHold, SpendResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

QUEUED_SK = "LIMIT#QUEUED"  # the queued count and the submission bucket
RUNNING_SK = "LIMIT#RUNNING"


@dataclass(frozen=True)
class Case:
    """Which of four conditional writes a spend is: the bucket idle (tat behind now: start
    again from now) or busy (push tat on, within the burst), in the minute of the last
    spend (count on) or a new one (count from zero)."""

    busy: bool
    same_minute: bool


def case_of(old: dict[str, Any], *, cost_ms: int, tolerance_ms: int, now_ms: int) -> Case | None:
    """The case the stored bucket is in; None when the spend must be refused."""
    same = int(old.get("minute", -1)) == now_ms // 60_000
    tat = int(old["tat"]) if "tat" in old else None
    if tat is None or tat < now_ms:
        return Case(busy=False, same_minute=same)
    if tat + cost_ms - now_ms <= tolerance_ms:
        return Case(busy=True, same_minute=same)
    return None


def _old_item(exc: ClientError) -> dict[str, Any]:
    """The item as it was, from a refused write's ReturnValuesOnConditionCheckFailure."""
    item: Any = exc.response.get("Item")
    return deserialize(item) if item else {}


class DynamoTenantCounters:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name
        # Each tenant's bucket (tat, minute) as this process last saw it: the first write
        # guesses the case right nearly always; a wrong guess costs one more conditional write.
        self._last: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def _key(self, tenant_id: str, sk: str) -> dict[str, Any]:
        return serialize({"pk": tenant_pk(tenant_id), "sk": sk})

    # --- submission bucket ------------------------------------------------------------------
    def spend(
        self, tenant_id: str, *, jobs: int, cost_ms: int, tolerance_ms: int, now_ms: int
    ) -> SpendResult:
        return self._spend_loop(tenant_id, jobs, cost_ms, tolerance_ms, now_ms, None).spent

    def spend_and_hold(
        self, tenant_id: str, *, cost_ms: int, tolerance_ms: int, now_ms: int, limit: int
    ) -> SpendHold:
        return self._spend_loop(tenant_id, 1, cost_ms, tolerance_ms, now_ms, limit)

    def _spend_loop(
        self,
        tenant_id: str,
        jobs: int,
        cost_ms: int,
        tolerance_ms: int,
        now_ms: int,
        hold_limit: int | None,
    ) -> SpendHold:
        """Spend ``jobs`` tokens and, with ``hold_limit``, hold queued room for them in the
        same write; a refusal's old item says which case holds, or that there is no room
        (then the tokens alone are spent)."""
        if cost_ms > tolerance_ms:
            return SpendHold(
                SpendResult(False, self.view(tenant_id, now_ms=now_ms).tat_ms, 0), None
            )
        minute = now_ms // 60_000
        with self._lock:
            last_tat, last_minute = self._last.get(tenant_id, (0, -1))
        guess = Case(busy=last_tat >= now_ms, same_minute=last_minute == minute)
        hold = hold_limit if hold_limit is not None and jobs <= hold_limit else None
        writes = 0
        for _ in range(5):  # each refusal says which case holds; concurrent spends may move it
            writes += 1
            try:
                tat, queued = self._spend(
                    tenant_id, guess, jobs, cost_ms, tolerance_ms, now_ms, hold
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                old = _old_item(exc)
                found = case_of(old, cost_ms=cost_ms, tolerance_ms=tolerance_ms, now_ms=now_ms)
                if found is None:
                    self._remember(tenant_id, int(old["tat"]), int(old.get("minute", -1)))
                    return SpendHold(SpendResult(False, int(old["tat"]), writes), None)
                if hold is not None and int(old.get("queued", 0)) > hold - jobs:
                    hold = None  # no room: the token alone, as a refused submission spends it
                guess = found
                continue
            self._remember(tenant_id, tat, minute)
            return SpendHold(SpendResult(True, tat, writes), queued)
        view = self.view(tenant_id, now_ms=now_ms)
        return SpendHold(SpendResult(False, view.tat_ms, writes), None)

    def _remember(self, tenant_id: str, tat: int, minute: int) -> None:
        with self._lock:
            if len(self._last) > 10_000:
                self._last.clear()
            self._last[tenant_id] = (tat, minute)

    def _spend(
        self,
        tenant_id: str,
        case: Case,
        jobs: int,
        cost_ms: int,
        tolerance_ms: int,
        now_ms: int,
        hold_limit: int | None,
    ) -> tuple[int, int | None]:
        """One conditional write for one case of the bucket (see ``Case``), holding queued
        room too with ``hold_limit``: the tat after it, and the queued count (None: not held)."""
        minute = now_ms // 60_000
        values: dict[str, Any] = {":now": now_ms, ":min": minute, ":jobs": jobs}
        if case.busy:
            tat_set = "tat = tat + :cost"
            condition = "tat >= :now AND tat <= :limit"
            values.update({":cost": cost_ms, ":limit": now_ms + tolerance_ms - cost_ms})
        else:
            tat_set = "tat = :tat"
            condition = "(attribute_not_exists(tat) OR tat < :now)"
            values[":tat"] = now_ms + cost_ms
        adds = []
        if case.same_minute:
            sets = [tat_set]
            adds.append("minute_count :jobs")
            condition += " AND #minute = :min"
        else:
            sets = [tat_set, "#minute = :min", "minute_count = :jobs"]
            condition += " AND (attribute_not_exists(#minute) OR #minute <> :min)"
        if hold_limit is not None:  # as add_queued's write, in this one
            adds += ["queued :jobs", "version :one"]
            condition += " AND (attribute_not_exists(queued) OR queued <= :room)"
            values.update({":one": 1, ":room": hold_limit - jobs})
        expression = "SET " + ", ".join(sets) + (" ADD " + ", ".join(adds) if adds else "")
        resp = self._db.update_item(
            TableName=self._table,
            Key=self._key(tenant_id, QUEUED_SK),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#minute": "minute"},
            ExpressionAttributeValues=serialize(values),
            ReturnValues="UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        new = deserialize(resp["Attributes"])
        return int(new["tat"]), int(new["queued"]) if hold_limit is not None else None

    # --- queued -----------------------------------------------------------------------------
    def add_queued(self, tenant_id: str, jobs: int, *, limit: int) -> int | None:
        if jobs > limit:
            return None
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, QUEUED_SK),
                UpdateExpression="ADD queued :n, version :one",
                ConditionExpression="attribute_not_exists(queued) OR queued <= :room",
                ExpressionAttributeValues=serialize({":n": jobs, ":one": 1, ":room": limit - jobs}),
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        return int(deserialize(resp["Attributes"])["queued"])

    def sub_queued(self, tenant_id: str, jobs: int) -> None:
        # Never below zero: a count a recount set low must not turn into extra room later.
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, QUEUED_SK),
                UpdateExpression="ADD queued :minus, version :one",
                ConditionExpression="queued >= :n",
                ExpressionAttributeValues=serialize({":minus": -jobs, ":one": 1, ":n": jobs}),
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def recount_queued(
        self, tenant_id: str, actual: Callable[[], int], *, now: int, every_s: int
    ) -> int | None:
        """Set the count to ``actual()`` unless recounted in the last ``every_s`` seconds or
        changed while counting. Returns the new count, or None when it did not write."""
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, QUEUED_SK),
                UpdateExpression="SET recounted_at = :now",
                ConditionExpression="attribute_not_exists(recounted_at) OR recounted_at < :due",
                ExpressionAttributeValues=serialize({":now": now, ":due": now - every_s}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        version = int(deserialize(resp["Attributes"]).get("version", 0))
        count = actual()
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, QUEUED_SK),
                UpdateExpression="SET queued = :count",
                ConditionExpression="attribute_not_exists(version) OR version = :v",
                ExpressionAttributeValues=serialize({":count": count, ":v": version}),
            )
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        return count

    # --- running ----------------------------------------------------------------------------
    def take_slot(self, tenant_id: str, job_id: str, *, limit: int) -> SlotTake:
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, RUNNING_SK),
                UpdateExpression="ADD running :job",
                ConditionExpression=(
                    "attribute_not_exists(running) OR size(running) < :limit "
                    "OR contains(running, :id)"
                ),
                ExpressionAttributeValues=serialize(
                    {":job": {job_id}, ":limit": limit, ":id": job_id}
                ),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return SlotTake(False, frozenset(_old_item(exc).get("running", set())))
        return SlotTake(True, frozenset(deserialize(resp["Attributes"]).get("running", set())))

    def give_back(self, tenant_id: str, job_id: str) -> None:
        self._db.update_item(
            TableName=self._table,
            Key=self._key(tenant_id, RUNNING_SK),
            UpdateExpression="DELETE running :job",
            ExpressionAttributeValues=serialize({":job": {job_id}}),
        )

    def give_back_held(self, tenant_id: str, job_id: str) -> bool:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(tenant_id, RUNNING_SK),
                UpdateExpression="DELETE running :job",
                ConditionExpression="contains(running, :id)",
                ExpressionAttributeValues=serialize({":job": {job_id}, ":id": job_id}),
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def slot_holders(self) -> dict[str, frozenset[str]]:
        # A Scan of the tenants table for its running sets (a set emptied is removed, so an
        # item with ``running`` holds slots). The table keeps a few small items per tenant;
        # the sweeper reads it once a minute (docs/decisions.md, 2026-12-05).
        out: dict[str, frozenset[str]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "sk = :running AND attribute_exists(running)",
            "ProjectionExpression": "pk, running",
            "ExpressionAttributeValues": serialize({":running": RUNNING_SK}),
        }
        while True:
            resp = self._db.scan(**kwargs)
            for item in resp.get("Items", []):
                data = deserialize(item)
                out[str(data["pk"]).removeprefix(tenant_pk(""))] = frozenset(data["running"])
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    # --- reading ----------------------------------------------------------------------------
    def view(self, tenant_id: str, *, now_ms: int) -> CounterView:
        # One BatchGetItem; a key DynamoDB left unprocessed is asked again (read as missing,
        # a tenant's running sessions would count none against its cap).
        keys = [self._key(tenant_id, sk) for sk in (QUEUED_SK, RUNNING_SK)]
        found = get_all(self._db, self._table, keys, consistent=True)
        items = {str(data["sk"]): data for data in (deserialize(i) for i in found)}
        bucket = items.get(QUEUED_SK, {})
        same_minute = int(bucket.get("minute", -1)) == now_ms // 60_000
        return CounterView(
            tat_ms=int(bucket["tat"]) if "tat" in bucket else None,
            minute_submits=int(bucket.get("minute_count", 0)) if same_minute else 0,
            queued=max(0, int(items.get(QUEUED_SK, {}).get("queued", 0))),
            running=frozenset(items.get(RUNNING_SK, {}).get("running", set())),
        )


class DynamoUnstartedJobs:
    """Counts a tenant's jobs not yet started (queued, scheduled or waiting: the ``by_status``
    index of the jobs table), for the rare recount of the queued counter."""

    def __init__(self, client: DynamoDBClient, jobs_table: str) -> None:
        self._db = client
        self._table = jobs_table

    def count_unstarted(self, tenant_id: str) -> int:
        return sum(self._count(tenant_id, status) for status in UNSTARTED)

    def _count(self, tenant_id: str, status: JobStatus) -> int:
        count = 0
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": "by_status",
            "KeyConditionExpression": "status_pk = :sp",
            # Redriven jobs are queued again with attempt_base = attempt.
            "FilterExpression": "attempt = attempt_base",
            "ExpressionAttributeValues": serialize({":sp": status_pk(tenant_id, status)}),
            "Select": "COUNT",
        }
        while True:
            resp = self._db.query(**kwargs)
            count += int(resp.get("Count", 0))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return count
            kwargs["ExclusiveStartKey"] = last
