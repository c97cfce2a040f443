"""The circuit breakers' state in the jobs table (see ``pagefleet.targets.breakers``).

Shared breakers live in one partition (``BREAKERS``, sort key ``ORIGIN#<host>#<scheme>:<port>``)
so ops list them in one query, and carry the set of tenants that failed in the current
window; a tenant's own breakers live in its partition (``BREAKER#<host>#...``). One write
per worker per origin per second lands here, far below a partition's 1,000 writes/s.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from pagefleet.targets.breakers import (
    SHARED,
    TENANT,
    Admission,
    BreakerPolicy,
    BreakerState,
    DomainStatus,
    split_origin,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_ser = TypeSerializer()
_de = TypeDeserializer()

BREAKERS_PK = "BREAKERS"


@dataclass(frozen=True)
class _Key:
    origin: str
    tenant: str | None = None  # None: the origin's shared breaker

    def item(self) -> dict[str, Any]:
        scheme, host, port = split_origin(self.origin)
        where = f"{host}#{scheme}:{port}"
        if self.tenant is None:
            return {"pk": _ser.serialize(BREAKERS_PK), "sk": _ser.serialize(f"ORIGIN#{where}")}
        return {
            "pk": _ser.serialize(f"TENANT#{self.tenant}"),
            "sk": _ser.serialize(f"BREAKER#{where}"),
        }


def _origin_of_sk(sk: str) -> str:
    where = sk.split("#", 1)[1]
    host, _, rest = where.rpartition("#")
    scheme, _, port = rest.partition(":")
    return f"{scheme}://{host}:{port}"


def _refused(exc: ClientError) -> bool:
    return exc.response["Error"]["Code"] == "ConditionalCheckFailedException"


class DomainBreakers:
    def __init__(
        self, client: DynamoDBClient, table_name: str, policy: BreakerPolicy | None = None
    ) -> None:
        self._db = client
        self._table = table_name
        self.policy = policy or BreakerPolicy()

    # --- reading ----------------------------------------------------------------------------
    def get(self, origin: str, tenant: str | None = None) -> DomainStatus:
        return self._get(_Key(origin, tenant))

    def _get(self, key: _Key) -> DomainStatus:
        resp = self._db.get_item(TableName=self._table, Key=key.item(), ConsistentRead=True)
        return self._status(key, resp.get("Item"))

    def _status(self, key: _Key, item: dict[str, Any] | None) -> DomainStatus:
        data = {k: _de.deserialize(v) for k, v in (item or {}).items()}
        opened = int(data["opened_at"]) if data.get("opened_at") is not None else None
        state = BreakerState(data.get("state", BreakerState.CLOSED.value))
        return DomainStatus(
            domain=key.origin,
            state=state,
            failures=int(data.get("failures", 0)),
            total=int(data.get("total", 0)),
            window_start=int(data.get("window_start", 0)),
            opened_at=opened,
            reopens_at=opened + self.policy.cooldown_s
            if opened is not None and state is not BreakerState.CLOSED
            else None,
            probe_started=int(data.get("probe_started", 0)),
            failing_tenants=len(data.get("failing_tenants", set())),
            tenant=key.tenant,
        )

    def _query(self, pk: str, prefix: str, tenant: str | None) -> builtins.list[DomainStatus]:
        out: list[DomainStatus] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": _ser.serialize(pk), ":p": _ser.serialize(prefix)},
        }
        while True:
            resp = self._db.query(**kwargs)
            for item in resp.get("Items", []):
                key = _Key(_origin_of_sk(_de.deserialize(item["sk"])), tenant)
                out.append(self._status(key, item))
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def list(self) -> list[DomainStatus]:
        """Every origin's shared breaker."""
        return self._query(BREAKERS_PK, "ORIGIN#", None)

    def on_host(self, host: str, tenant: str | None = None) -> builtins.list[DomainStatus]:
        """The breakers of every origin on ``host``: shared ones, or ``tenant``'s own."""
        if tenant is None:
            return self._query(BREAKERS_PK, f"ORIGIN#{host}#", None)
        return self._query(f"TENANT#{tenant}", f"BREAKER#{host}#", tenant)

    # --- the worker's side ------------------------------------------------------------------
    def admit(self, origin: str, *, tenant: str, now: int, worker: str) -> Admission:
        shared = self._admit(_Key(origin), now=now, worker=worker)
        if not shared.allowed:
            return shared
        own = self._admit(_Key(origin, tenant), now=now, worker=worker)
        if not own.allowed:
            if shared.probe:  # it will not run: the shared breaker waits another cooldown
                self._end_probe(_Key(origin), ok=False, now=now, worker=worker)
            return Admission(False, retry_after_s=own.retry_after_s, state=own.state, scope=TENANT)
        probes = frozenset(s for s, a in ((SHARED, shared), (TENANT, own)) if a.probe)
        return Admission(True, probe=bool(probes), state=shared.state, probes=probes)

    def _admit(self, key: _Key, *, now: int, worker: str) -> Admission:
        status = self._get(key)
        scope = SHARED if key.tenant is None else TENANT
        if status.state is BreakerState.CLOSED:
            return Admission(allowed=True)
        assert status.opened_at is not None
        if status.state is BreakerState.OPEN:
            wait = status.opened_at + self.policy.cooldown_s - now
            if wait > 0:
                return Admission(False, retry_after_s=wait, state=status.state, scope=scope)
            condition = "#s = :open AND opened_at = :opened"
            values: dict[str, Any] = {":open": BreakerState.OPEN.value, ":opened": status.opened_at}
        else:  # half open: a probe is out; replace it only if it went silent
            if now - status.probe_started < self.policy.probe_timeout_s:
                return Admission(
                    False, retry_after_s=self.policy.cooldown_s, state=status.state, scope=scope
                )
            condition = "#s = :half AND probe_started = :probe_started"
            values = {":probe_started": status.probe_started}
        values.update({":half": BreakerState.HALF_OPEN.value, ":w": worker, ":now": now})
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key.item(),
                UpdateExpression="SET #s = :half, probe_owner = :w, probe_started = :now",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues=_values(values),
            )
        except ClientError as exc:
            if not _refused(exc):
                raise
            # Another worker became the probe first.
            return Admission(
                False,
                retry_after_s=self.policy.cooldown_s,
                state=BreakerState.HALF_OPEN,
                scope=scope,
            )
        return Admission(True, probe=True, state=BreakerState.HALF_OPEN, probes=frozenset({scope}))

    def record(
        self,
        origin: str,
        *,
        tenant: str,
        ok: bool,
        now: int,
        probes: frozenset[str] = frozenset(),
        worker: str = "",
    ) -> BreakerState:
        """Count one outcome (or end the probes this job was); returns the shared state."""
        if probes:
            states = [
                self._end_probe(
                    _Key(origin, None if s == SHARED else tenant), ok=ok, now=now, worker=worker
                )
                for s in sorted(probes)
            ]
            return _worst(states)
        return self.record_counts(origin, tenant=tenant, total=1, failures=0 if ok else 1, now=now)

    def record_counts(
        self, origin: str, *, tenant: str, total: int, failures: int, now: int
    ) -> BreakerState:
        """Count a batch of outcomes (workers add a second's worth per origin and tenant)
        on the tenant's breaker and the shared one; returns the worse of the two states."""
        own = self._count(_Key(origin, tenant), total, failures, now, failing=None)
        shared = self._count(_Key(origin), total, failures, now, failing=tenant)
        return _worst([own, shared])

    def _count(
        self, key: _Key, total: int, failures: int, now: int, *, failing: str | None
    ) -> BreakerState:
        status = self._get(key)
        if status.window_start <= now - self.policy.window_s:
            self._reset_window(key, status.window_start, now)
        expression = "ADD #total :n, failures :f"
        values: dict[str, Any] = {":n": total, ":f": failures, ":closed": BreakerState.CLOSED.value}
        if failing is not None and failures:
            expression += ", failing_tenants :who"
            values[":who"] = {failing}
        resp = self._db.update_item(
            TableName=self._table,
            Key=key.item(),
            UpdateExpression=f"{expression} SET #s = if_not_exists(#s, :closed)",
            ExpressionAttributeNames={"#s": "state", "#total": "total"},
            ExpressionAttributeValues=_values(values),
            ReturnValues="ALL_NEW",
        )
        after = self._status(key, resp["Attributes"])
        enough_tenants = key.tenant is not None or after.failing_tenants >= self.policy.min_tenants
        if (
            after.state is BreakerState.CLOSED
            and enough_tenants
            and after.total >= self.policy.min_requests
            and after.failures / after.total >= self.policy.failure_rate
        ):
            return self._open(key, now, expect=BreakerState.CLOSED)
        return after.state

    def _reset_window(self, key: _Key, old_start: int, now: int) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key.item(),
                UpdateExpression=(
                    "SET window_start = :now, #total = :zero, failures = :zero "
                    "REMOVE failing_tenants"
                ),
                ConditionExpression="attribute_not_exists(window_start) OR window_start = :old",
                ExpressionAttributeNames={"#total": "total"},
                ExpressionAttributeValues=_values({":now": now, ":zero": 0, ":old": old_start}),
            )
        except ClientError as exc:
            if not _refused(exc):
                raise  # else another worker reset it already

    def _open(self, key: _Key, now: int, *, expect: BreakerState) -> BreakerState:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key.item(),
                UpdateExpression=(
                    "SET #s = :open, opened_at = :now REMOVE probe_owner, probe_started"
                ),
                ConditionExpression="#s = :expect",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues=_values(
                    {":open": BreakerState.OPEN.value, ":now": now, ":expect": expect.value}
                ),
            )
        except ClientError as exc:
            if not _refused(exc):
                raise
        return self._get(key).state

    def _end_probe(self, key: _Key, *, ok: bool, now: int, worker: str) -> BreakerState:
        if not ok:
            return self._open(key, now, expect=BreakerState.HALF_OPEN)
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key.item(),
                UpdateExpression=(
                    "SET #s = :closed, window_start = :now, #total = :zero, failures = :zero "
                    "REMOVE opened_at, probe_owner, probe_started, failing_tenants"
                ),
                ConditionExpression="#s = :half AND probe_owner = :w",
                ExpressionAttributeNames={"#s": "state", "#total": "total"},
                ExpressionAttributeValues=_values(
                    {
                        ":closed": BreakerState.CLOSED.value,
                        ":half": BreakerState.HALF_OPEN.value,
                        ":now": now,
                        ":zero": 0,
                        ":w": worker,
                    }
                ),
            )
        except ClientError as exc:
            if not _refused(exc):
                raise
        return self._get(key).state


_RANK = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


def _worst(states: list[BreakerState]) -> BreakerState:
    return max(states, key=_RANK.__getitem__, default=BreakerState.CLOSED)


def _values(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items()}
