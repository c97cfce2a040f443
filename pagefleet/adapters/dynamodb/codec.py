"""How job records sit in the jobs table: keys, index attributes and item (de)serialization.

Shared by the job store, the cursors and the tests that read items directly.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.ports import JobFilter
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.stored import STORED

_ser = TypeSerializer()
_de = TypeDeserializer()
UNQUEUED = "unqueued"
# The ops index is sharded so no single GSI partition takes every claim and heartbeat.
OPS_SHARDS = 4


def shard_of(key: str, shards: int) -> int:
    """Which of ``shards`` items ``key`` writes to (a hash: stable across processes)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:4], 16) % shards


def ops_shard(job_id: str) -> int:
    return shard_of(job_id, OPS_SHARDS)


def ops_key(kind: str, job_id: str) -> str:
    return kind if kind == "dead" else f"{kind}#{ops_shard(job_id)}"


def ops_time(epoch_seconds: int) -> str:
    return f"{max(0, epoch_seconds):012d}"


def tenant_pk(tenant_id: str) -> str:
    return f"TENANT#{tenant_id}"


def job_sk(job_id: str) -> str:
    return f"JOB#{job_id}"


def idempotency_sk(key: str) -> str:
    # Hashed so that any client-chosen key fits and sorts harmlessly.
    return "IDEM#" + hashlib.sha256(key.encode()).hexdigest()


def status_pk(tenant_id: str, status: JobStatus) -> str:
    return f"{tenant_id}#{status.value}"


def listing_key(tenant_id: str, job_id: str, status: JobStatus | None) -> dict[str, str]:
    """The key a job listing goes on from after ``job_id`` (the status index's with one)."""
    key = {"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}
    return key if status is None else {**key, "status_pk": status_pk(tenant_id, status)}


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in item.items() if v is not None}


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _de.deserialize(v) for k, v in item.items()}


# Job fields stored as JSON text: they are nested documents the store never queries into.
_JSON_FIELDS = (
    "request",
    "result",
    "artifacts",
    "error",
    "changes",
    "checkpoints",
    "human",
    "compensation",
    "resolution",
)
# Left out of an item while empty: most jobs have no irreversible step.
_OMITTED_WHEN_EMPTY = (
    "checkpoints",
    "compensation",
    "resolution",
    "human",
    "replays",
    "takeover",
)


def to_json(value: Any) -> str:
    """Compact JSON kept as UTF-8 text: escaping non-ASCII (6 bytes a character) would let a
    record of non-Latin text pass the 400 KB item limit at a third of its real size."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# Keys that name a union's member: a step's `action` defaults to its kind's one value, yet
# the stored step needs it to be read back as that kind.
_DISCRIMINATORS = ("action",)


def _keep_discriminators(sparse: Any, full: Any) -> None:
    if isinstance(sparse, dict) and isinstance(full, dict):
        for key in _DISCRIMINATORS:
            if key in full and key not in sparse:
                sparse[key] = full[key]
        for key, value in sparse.items():
            _keep_discriminators(value, full.get(key))
    elif isinstance(sparse, list) and isinstance(full, list):
        for part, whole in zip(sparse, full, strict=False):
            _keep_discriminators(part, whole)


def request_text(request: JobRequest) -> str:
    """The request as its record keeps it: what differs from a default, and each step's kind.

    DynamoDB bills a write by the KB of the item, and every index of the jobs table holds the
    whole item: a plain job's request written whole (~930 bytes, defaults and nulls mostly)
    made each of its record's writes two units, and as many in each index it was in. A
    default is read back as the reading version's default (docs/decisions.md, 2026-12-07).
    A request whose sparse form would not read back to the same whole form is kept whole:
    one that says a default out loud where saying it means something (a notify's explicit
    ``"webhook": null``, none at all, against an omitted one, the tenant's default).
    """
    full = request.model_dump(mode="json")
    sparse = request.model_dump(mode="json", exclude_defaults=True)
    _keep_discriminators(sparse, full)
    if JobRequest.model_validate(sparse, context=STORED).model_dump(mode="json") != full:
        return to_json(full)
    return to_json(sparse)


def record_to_item(record: JobRecord) -> dict[str, Any]:
    data = record.model_dump(mode="json", exclude={"request"})
    item: dict[str, Any] = {
        "pk": tenant_pk(record.tenant_id),
        "sk": job_sk(record.job_id),
        "status_pk": status_pk(record.tenant_id, record.status),
    }
    item["request"] = request_text(record.request)
    # Attempt history is a DynamoDB list so a finishing worker can append to it atomically.
    item["attempt_log"] = [to_json(a) for a in data.pop("attempts")]
    for key, value in data.items():
        if key in _OMITTED_WHEN_EMPTY and not value:
            continue
        if value is None and key in ("events_seq", "expires_at"):
            # events_seq: written only by a record that had it (its claims ADD to it);
            # expires_at: DynamoDB's TTL attribute, only ever a number.
            continue
        if key in _JSON_FIELDS:
            item[key] = to_json(value)
        else:
            item[key] = value
    return item


def item_to_record(item: Mapping[str, Any]) -> JobRecord:
    data = deserialize(item)
    for key in _JSON_FIELDS:
        if isinstance(data.get(key), str):
            data[key] = json.loads(data[key])
    data["attempts"] = [json.loads(a) for a in data.pop("attempt_log", [])]
    for key in (
        "attempt",
        "lease_expires_at",
        "leases_lost",
        "events_seq",
        "events_bounded",
        "expires_at",
    ):
        if data.get(key) is not None:
            data[key] = int(data[key])
    # A job recorded before its event counter lived on it (pagefleet.live.numbers).
    data.setdefault("events_seq", None)
    fields = {k: v for k, v in data.items() if k in JobRecord.model_fields}
    return JobRecord.model_validate(fields, context=STORED)


def filter_expression(where: JobFilter) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A listing's filters as a FilterExpression, its names and values ("": none)."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    conditions = []
    if where.name is not None:
        # The request is JSON text: it holds `"name":<name>` when it has that name (the text
        # may also sit inside a step: the store's exact check drops those).
        names["#request"] = "request"
        conditions.append("contains(#request, :name)")
        values[":name"] = '"name":' + to_json(where.name)
    if where.workflow is not None:
        names["#workflow"] = "workflow"
        conditions.append("#workflow = :workflow")
        values[":workflow"] = where.workflow
    if where.schedule_id is not None:
        names["#schedule"] = "schedule_id"
        conditions.append("#schedule = :schedule")
        values[":schedule"] = where.schedule_id
    return " AND ".join(conditions), names, values


def epoch_of(at: str) -> int:
    return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())


def update_job_if(
    db: Any, table: str, tenant_id: str, job_id: str, update: str, condition: str, values: Any
) -> bool:
    """Apply ``update`` to an existing job record only if ``condition`` holds (``#status``
    names its status); False, and nothing written, when it does not."""
    try:
        db.update_item(
            TableName=table,
            Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
            UpdateExpression=update,
            ConditionExpression=f"attribute_exists(pk) AND ({condition})",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=serialize(values),
        )
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        return False
    return True


def put_new(db: Any, table: str, item: Mapping[str, Any]) -> None:
    """Put an item whose key is new (a fresh id), once.

    A put whose reply was lost is sent again by botocore and then finds its own item: that
    is the put done, not a conflict. Only an item other than this one raises
    (ConditionalCheckFailedException, as before)."""
    wire = serialize(dict(item))
    try:
        db.put_item(TableName=table, Item=wire, ConditionExpression="attribute_not_exists(pk)")
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        if not stored_as_written(db, table, wire):
            raise


def read_item(
    db: Any, table: str, key: Mapping[str, Any], *, consistent: bool = False, **extra: Any
) -> dict[str, Any] | None:
    """GetItem's item (DynamoDB JSON), or None. An eventually consistent read's miss is not
    an answer: an item written a moment ago may not be in the copy that answered (AWS: a
    read repeated "after a short time" returns it), so it is read again, consistently,
    before None is returned. A found item costs one read; a miss, two."""
    resp = db.get_item(TableName=table, Key=key, ConsistentRead=consistent, **extra)
    if "Item" in resp or consistent:
        return resp.get("Item")
    found: dict[str, Any] | None = db.get_item(
        TableName=table, Key=key, ConsistentRead=True, **extra
    ).get("Item")
    return found


def stored_as_written(db: Any, table: str, wire: Mapping[str, Any]) -> bool:
    """True when the table holds exactly this item (DynamoDB JSON): a refused write of a new
    item whose earlier try, its reply lost, was applied (a transaction: all of it)."""
    key = {"pk": wire["pk"], "sk": wire["sk"]}
    there = db.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    return there is not None and deserialize(there) == deserialize(wire)


def condition_failed(exc: ClientError, *, item: int | None = None) -> bool:
    """True when DynamoDB refused a write because a condition did not hold, read one way.

    A single write answers ``ConditionalCheckFailedException``; a transaction answers
    ``TransactionCanceledException`` with one ``CancellationReasons`` entry per item, in
    order, and ``ConditionalCheckFailed`` on the items whose condition failed; ``item`` asks
    about that item of a transaction only. A transaction cancelled for another reason (a
    conflict with another transaction, throttling, a validation error) did not fail a
    condition: the caller lets it raise rather than report a refusal that did not happen.
    """
    code = exc.response.get("Error", {}).get("Code")
    if code == "ConditionalCheckFailedException":
        return True
    if code != "TransactionCanceledException":
        return False
    codes = cancellation_codes(exc)
    if item is not None:
        codes = codes[item : item + 1]
    return "ConditionalCheckFailed" in codes


def met_another_transaction(exc: ClientError) -> bool:
    """True when a transaction was cancelled only because another one under way held one of
    its items (``TransactionConflict``, no condition failed): nothing was written, and the
    same request may be sent again (``transactions.write_together``)."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return False
    codes = cancellation_codes(exc)
    return "TransactionConflict" in codes and "ConditionalCheckFailed" not in codes


def cancellation_codes(exc: ClientError) -> list[str]:
    """Each item's reason code, in order: from ``CancellationReasons``, or else from the
    message, which lists them too ("... reasons [None, ConditionalCheckFailed]"): the API
    reference says only some SDKs fill the property."""
    reasons: Any = exc.response.get("CancellationReasons")
    if reasons:
        return [str(reason.get("Code")) for reason in reasons]
    listed = re.search(
        r"\[([A-Za-z, ]*)\]\s*$", str(exc.response.get("Error", {}).get("Message", ""))
    )
    return [code.strip() for code in listed.group(1).split(",")] if listed else []
