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

from pagefleet.adapters.dynamodb.codec import condition_failed
from pagefleet.targets.breakers import (
    SHARED,
    TENANT,
    Admission,
    BreakerPolicy,
    BreakerState,
    DomainStatus,
    split_origin,
    trusted,
    worst,
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
            last_ok_at=int(data["last_ok_at"]) if data.get("last_ok_at") is not None else None,
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
    def _get_both(self, own: _Key, shared: _Key) -> tuple[DomainStatus, DomainStatus]:
        """Both of an origin's breakers in one request (BatchGetItem, strongly consistent)."""

        def name(item: dict[str, Any]) -> tuple[str, str]:
            return str(item["pk"]["S"]), str(item["sk"]["S"])

        found: dict[tuple[str, str], dict[str, Any]] = {}
        request: dict[str, Any] = {
            self._table: {"Keys": [own.item(), shared.item()], "ConsistentRead": True}
        }
        for _ in range(3):  # keys left unprocessed (throttled) are asked for again
            resp = self._db.batch_get_item(RequestItems=request)
            for item in resp.get("Responses", {}).get(self._table, []):
                found[name(item)] = item
            request = dict(resp.get("UnprocessedKeys") or {})
            if not request:
                return (
                    self._status(own, found.get(name(own.item()))),
                    self._status(shared, found.get(name(shared.item()))),
                )
        return self._get(own), self._get(shared)

    def admit(self, origin: str, *, tenant: str, now: int, worker: str) -> Admission:
        own_key, shared_key = _Key(origin, tenant), _Key(origin)
        own, shared = self._get_both(own_key, shared_key)
        # The tenant's own breaker first: a tenant held back by its own failures never
        # takes (and fails) the shared breaker's probe.
        refused = self._waiting(own, now, TENANT)
        if refused is not None:
            return refused
        refused = self._waiting(shared, now, SHARED)
        if refused is not None:
            if trusted(own, self.policy, now):
                return Admission(True, state=shared.state)
            self._touch(own_key)  # the tenant's job used the origin: it may ask about it
            return refused
        probes: set[str] = set()
        if own.state is not BreakerState.CLOSED:
            if not self._take_probe(own_key, own, now, worker):
                return self._probe_out(TENANT)
            probes.add(TENANT)
        if shared.state is not BreakerState.CLOSED:
            if not self._take_probe(shared_key, shared, now, worker):
                if probes:  # it will not run: the tenant's breaker waits another cooldown
                    self._end_probe(own_key, ok=False, now=now, worker=worker)
                return self._probe_out(SHARED)
            probes.add(SHARED)
        state = BreakerState.HALF_OPEN if SHARED in probes else shared.state
        return Admission(True, probe=bool(probes), state=state, probes=frozenset(probes))

    def _waiting(self, status: DomainStatus, now: int, scope: str) -> Admission | None:
        """The refusal while ``status``'s breaker waits (cooldown, or a live probe out)."""
        if status.state is BreakerState.CLOSED:
            return None
        assert status.opened_at is not None
        if status.state is BreakerState.OPEN:
            wait = status.opened_at + self.policy.cooldown_s - now
            if wait > 0:
                return Admission(False, retry_after_s=wait, state=status.state, scope=scope)
            return None
        if now - status.probe_started < self.policy.probe_timeout_s:
            return self._probe_out(scope)
        return None  # half open, but its probe went silent: replace it

    def _probe_out(self, scope: str) -> Admission:
        cooldown = self.policy.cooldown_s
        return Admission(False, retry_after_s=cooldown, state=BreakerState.HALF_OPEN, scope=scope)

    def _touch(self, key: _Key) -> None:
        """Make sure the breaker exists (closed if new): the tenant may then look it up."""
        self._db.update_item(
            TableName=self._table,
            Key=key.item(),
            UpdateExpression="SET #s = if_not_exists(#s, :closed)",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues=_values({":closed": BreakerState.CLOSED.value}),
        )

    def _take_probe(self, key: _Key, status: DomainStatus, now: int, worker: str) -> bool:
        """Become the half-open probe of an open breaker whose cooldown is over (or whose
        probe went silent); False when another worker became it first."""
        if status.state is BreakerState.OPEN:
            condition = "#s = :open AND opened_at = :opened"
            values: dict[str, Any] = {":open": BreakerState.OPEN.value, ":opened": status.opened_at}
        else:
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
            if not condition_failed(exc):
                raise
            return False
        return True

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
            return worst(states)
        return self.record_counts(origin, tenant=tenant, total=1, failures=0 if ok else 1, now=now)

    def record_counts(
        self, origin: str, *, tenant: str, total: int, failures: int, now: int
    ) -> BreakerState:
        """Count a batch of outcomes (workers add a second's worth per origin and tenant)
        on the tenant's breaker and the shared one; returns the worse of the two states."""
        own = self._count(_Key(origin, tenant), total, failures, now, failing=None)
        shared = self._count(_Key(origin), total, failures, now, failing=tenant)
        return worst([own, shared])

    def _count(
        self, key: _Key, total: int, failures: int, now: int, *, failing: str | None
    ) -> BreakerState:
        """Add the counts in one conditional write while the window is current; a window
        that ran out (or a breaker never counted) is reset first, then counted on."""
        expression = "ADD #total :n, failures :f"
        values: dict[str, Any] = {
            ":n": total,
            ":f": failures,
            ":closed": BreakerState.CLOSED.value,
            ":stale": now - self.policy.window_s,
        }
        if failing is not None and failures:
            expression += ", failing_tenants :who"
            values[":who"] = {failing}
        sets = "#s = if_not_exists(#s, :closed)"
        if key.tenant is not None and total > failures:
            sets += ", last_ok_at = :now"  # when the tenant last succeeded there (trust)
            values[":now"] = now
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": key.item(),
            "UpdateExpression": f"{expression} SET {sets}",
            "ExpressionAttributeNames": {"#s": "state", "#total": "total"},
            "ReturnValues": "ALL_NEW",
        }
        try:
            resp = self._db.update_item(
                **update,
                ConditionExpression="window_start > :stale",
                ExpressionAttributeValues=_values(values),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            # The window ran out (or the breaker was never counted): a new one from now,
            # unless another worker started it first; then count in whichever is current.
            old = self._status(key, exc.response.get("Item"))  # type: ignore[arg-type]
            self._reset_window(key, old.window_start, now)
            del values[":stale"]
            resp = self._db.update_item(**update, ExpressionAttributeValues=_values(values))
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
            if not condition_failed(exc):
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
            if not condition_failed(exc):
                raise
        return self._get(key).state

    def keep_probe(
        self, origin: str, *, tenant: str, probes: frozenset[str], now: int, worker: str
    ) -> None:
        for scope in sorted(probes):
            key = _Key(origin, None if scope == SHARED else tenant)
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=key.item(),
                    UpdateExpression="SET probe_started = :now",
                    ConditionExpression="#s = :half AND probe_owner = :w",
                    ExpressionAttributeNames={"#s": "state"},
                    ExpressionAttributeValues=_values(
                        {":now": now, ":half": BreakerState.HALF_OPEN.value, ":w": worker}
                    ),
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise  # else the probe was replaced or has ended: nothing to keep

    def _end_probe(self, key: _Key, *, ok: bool, now: int, worker: str) -> BreakerState:
        if not ok:
            return self._open(key, now, expect=BreakerState.HALF_OPEN)
        # A tenant's probe that succeeded is its latest success there (trust).
        trust = ", last_ok_at = :now" if key.tenant is not None else ""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key.item(),
                UpdateExpression=(
                    "SET #s = :closed, window_start = :now, #total = :zero, failures = :zero"
                    f"{trust} REMOVE opened_at, probe_owner, probe_started, failing_tenants"
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
            if not condition_failed(exc):
                raise
        return self._get(key).state


def _values(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items()}
