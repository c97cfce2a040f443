"""The circuit breakers' shared state in the jobs table (see ``pagefleet.breaker``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from pagefleet.breaker import Admission, BreakerPolicy, BreakerState, DomainStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_ser = TypeSerializer()
_de = TypeDeserializer()

# All breakers live in one partition so ops can list them in one query. One write per
# finished job lands here: fine far below DynamoDB's 1,000 writes/s per partition.
BREAKERS_PK = "BREAKERS"


class DomainBreakers:
    def __init__(
        self, client: DynamoDBClient, table_name: str, policy: BreakerPolicy | None = None
    ) -> None:
        self._db = client
        self._table = table_name
        self.policy = policy or BreakerPolicy()

    def _key(self, domain: str) -> dict[str, Any]:
        return {"pk": _ser.serialize(BREAKERS_PK), "sk": _ser.serialize(f"DOMAIN#{domain}")}

    def get(self, domain: str) -> DomainStatus:
        resp = self._db.get_item(TableName=self._table, Key=self._key(domain), ConsistentRead=True)
        return self._status(domain, resp.get("Item"))

    def _status(self, domain: str, item: dict[str, Any] | None) -> DomainStatus:
        data = {k: _de.deserialize(v) for k, v in (item or {}).items()}
        opened = int(data["opened_at"]) if data.get("opened_at") is not None else None
        state = BreakerState(data.get("state", BreakerState.CLOSED.value))
        return DomainStatus(
            domain=domain,
            state=state,
            failures=int(data.get("failures", 0)),
            total=int(data.get("total", 0)),
            window_start=int(data.get("window_start", 0)),
            opened_at=opened,
            reopens_at=opened + self.policy.cooldown_s
            if opened is not None and state is not BreakerState.CLOSED
            else None,
            probe_started=int(data.get("probe_started", 0)),
        )

    def list(self) -> list[DomainStatus]:
        resp = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": _ser.serialize(BREAKERS_PK)},
        )
        return [
            self._status(_de.deserialize(i["sk"]).removeprefix("DOMAIN#"), i)
            for i in resp.get("Items", [])
        ]

    # --- the worker's side ------------------------------------------------------------------
    def admit(self, domain: str, *, now: int, worker: str) -> Admission:
        status = self.get(domain)
        if status.state is BreakerState.CLOSED:
            return Admission(allowed=True)
        assert status.opened_at is not None
        if status.state is BreakerState.OPEN:
            wait = status.opened_at + self.policy.cooldown_s - now
            if wait > 0:
                return Admission(allowed=False, retry_after_s=wait, state=status.state)
            condition = "#s = :open AND opened_at = :opened"
        else:  # half open: a probe is out; replace it only if it went silent
            if now - status.probe_started < self.policy.probe_timeout_s:
                return Admission(
                    allowed=False, retry_after_s=self.policy.cooldown_s, state=status.state
                )
            condition = "#s = :half AND probe_started = :probe_started"
        values: dict[str, Any] = {
            ":half": BreakerState.HALF_OPEN.value,
            ":w": worker,
            ":now": now,
        }
        if status.state is BreakerState.OPEN:
            values.update({":open": BreakerState.OPEN.value, ":opened": status.opened_at})
        else:
            values[":probe_started"] = status.probe_started
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(domain),
                UpdateExpression="SET #s = :half, probe_owner = :w, probe_started = :now",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues=_values(values),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            # Another worker became the probe first.
            return Admission(
                allowed=False, retry_after_s=self.policy.cooldown_s, state=BreakerState.HALF_OPEN
            )
        return Admission(allowed=True, probe=True, state=BreakerState.HALF_OPEN)

    def record(
        self, domain: str, *, ok: bool, now: int, probe: bool = False, worker: str = ""
    ) -> BreakerState:
        """Count one outcome against the domain; returns the breaker's state afterwards."""
        if probe:
            return self._end_probe(domain, ok=ok, now=now, worker=worker)
        return self.record_counts(domain, total=1, failures=0 if ok else 1, now=now)

    def record_counts(self, domain: str, *, total: int, failures: int, now: int) -> BreakerState:
        """Count a batch of outcomes (workers aggregate a second's worth per domain)."""
        status = self.get(domain)
        if status.window_start <= now - self.policy.window_s:
            self._reset_window(domain, status.window_start, now)
        resp = self._db.update_item(
            TableName=self._table,
            Key=self._key(domain),
            UpdateExpression="ADD #total :n, failures :f SET #s = if_not_exists(#s, :closed)",
            ExpressionAttributeNames={"#s": "state", "#total": "total"},
            ExpressionAttributeValues=_values(
                {":n": total, ":f": failures, ":closed": BreakerState.CLOSED.value}
            ),
            ReturnValues="ALL_NEW",
        )
        after = self._status(domain, resp["Attributes"])
        if (
            after.state is BreakerState.CLOSED
            and after.total >= self.policy.min_requests
            and after.failures / after.total >= self.policy.failure_rate
        ):
            return self._open(domain, now, expect=BreakerState.CLOSED)
        return after.state

    def _reset_window(self, domain: str, old_start: int, now: int) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(domain),
                UpdateExpression="SET window_start = :now, #total = :zero, failures = :zero",
                ConditionExpression="attribute_not_exists(window_start) OR window_start = :old",
                ExpressionAttributeNames={"#total": "total"},
                ExpressionAttributeValues=_values({":now": now, ":zero": 0, ":old": old_start}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise  # else another worker reset it already

    def _open(self, domain: str, now: int, *, expect: BreakerState) -> BreakerState:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(domain),
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
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        return self.get(domain).state

    def _end_probe(self, domain: str, *, ok: bool, now: int, worker: str) -> BreakerState:
        if not ok:
            return self._open(domain, now, expect=BreakerState.HALF_OPEN)
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(domain),
                UpdateExpression=(
                    "SET #s = :closed, window_start = :now, #total = :zero, failures = :zero "
                    "REMOVE opened_at, probe_owner, probe_started"
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
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        return self.get(domain).state


def _values(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items()}
