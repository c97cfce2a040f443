"""What an AWS request asks IAM: the caller's access key, and each (action, resource, context)
the request needs allowed, as the service authorization reference lists them.

A request is read from its wire form (what the embedded AWS receives): the SigV4 credential
scope names the service, then the operation comes from ``X-Amz-Target`` (JSON protocols),
the ``Action`` parameter (query protocols), or the method and path (S3, Scheduler). Mapped:

- DynamoDB: item operations on the table (``dynamodb:LeadingKeys`` from the item's key),
  Query/Scan on the table or ``<table>/index/<name>``, BatchGetItem/BatchWriteItem per table,
  TransactWriteItems/TransactGetItems per item as the item's own action; streams on the
  stream (a shard iterator carries its stream's ARN).
- SQS on the queue (the batch calls are the single calls' actions); S3 objects and bucket
  (ListObjects -> ``s3:ListBucket`` with ``s3:prefix``, HeadObject -> ``s3:GetObject``, a
  tagged PutObject also ``s3:PutObjectTagging``, DeleteObjects ``s3:DeleteObject`` per key);
  Secrets Manager on the secret; EventBridge PutEvents on each entry's bus; Scheduler on
  ``schedule/<group>/<name>`` (with ``iam:PassRole`` of the target's role); STS AssumeRole
  (and ``sts:TagSession`` with ``aws:RequestTag/*`` and ``aws:TagKeys``).

Anything else becomes ``<service>:<Operation>`` on ``*``, which no pagefleet policy allows:
an unmapped call by a checked principal is refused and named, never let through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from devstack.iam.policy import Request
from pagefleet.specs.resources import TABLES

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]+/([^/]+)/([^/]+)/aws4_request")


@dataclass(frozen=True)
class Wire:
    """An HTTP request as the embedded AWS received it."""

    method: str
    path: str  # URL-decoded
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name, "")

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


def credential(wire: Wire) -> tuple[str, str, str] | None:
    """(access key id, region, service) from the SigV4 signature or a presigned URL."""
    found = _CREDENTIAL.search(wire.header("authorization"))
    if found:
        return found.group(1), found.group(2), found.group(3)
    presigned = wire.param("X-Amz-Credential")
    if presigned:
        parts = presigned.split("/")
        if len(parts) >= 4:
            return parts[0], parts[2], parts[3]
    # S3's older signature (a presigned URL's AWSAccessKeyId, or "AWS key:signature").
    legacy = wire.param("AWSAccessKeyId")
    header = wire.header("authorization")
    if not legacy and header.startswith("AWS "):
        legacy = header[4:].partition(":")[0]
    return (legacy, "", "s3") if legacy else None


@dataclass(frozen=True)
class Account:
    """Where the resources live, and the tables' key attributes (for LeadingKeys)."""

    region: str
    account: str
    prefix: str = ""  # resource names' prefix (the worker smoke uses its own)
    _hash_keys: dict[tuple[str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for spec in TABLES:
            name = self.prefix + spec.local_name
            self._hash_keys[(name, "")] = spec.partition_key.name
            for index in spec.indexes:
                self._hash_keys[(name, index.name)] = index.partition_key.name

    def arn(self, service: str, resource: str, *, region: bool = True) -> str:
        where = self.region if region else ""
        return f"arn:aws:{service}:{where}:{self.account}:{resource}"

    def hash_key(self, table: str, index: str = "") -> str | None:
        return self._hash_keys.get((table, index))


def requests_for(wire: Wire, service: str, account: Account) -> list[Request]:
    """Every authorization the request needs (empty: it needs none, e.g. GetCallerIdentity)."""
    reader = _READERS.get(service)
    if reader is None:
        return [Request(f"{service}:{_operation(wire) or 'Unknown'}", "*")]
    return reader(wire, account)


def _operation(wire: Wire) -> str:
    target = wire.header("x-amz-target")
    if target:
        return target.rpartition(".")[2]
    return _form(wire).get("Action", "")


def _json(wire: Wire) -> dict[str, Any]:
    try:
        body = json.loads(wire.body or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def form_fields(wire: Wire) -> dict[str, str]:
    """A query-protocol call's parameters (URL query and form body)."""
    return _form(wire)


def _form(wire: Wire) -> dict[str, str]:
    fields = {k: v[0] for k, v in wire.query.items()}
    if wire.body and b"=" in wire.body and not wire.body.lstrip().startswith((b"{", b"<")):
        fields.update({k: v[0] for k, v in parse_qs(wire.body.decode(errors="replace")).items()})
    return fields


# --- DynamoDB --------------------------------------------------------------------------------
def _scalar(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        kind, raw = next(iter(value.items()))
        if kind in ("S", "N", "B"):
            return str(raw)
    return None


def _leading(account: Account, table: str, items: list[Any]) -> dict[str, tuple[str, ...]]:
    name = account.hash_key(table)
    if name is None:
        return {}
    values = {_scalar(item.get(name)) for item in items if isinstance(item, dict)}
    return {"dynamodb:LeadingKeys": tuple(sorted(v for v in values if v is not None))}


_KEY_EQUALS = re.compile(r"(#?[A-Za-z0-9_.-]+)\s*=\s*(:[A-Za-z0-9_]+)")


def _query_leading(account: Account, body: dict[str, Any], table: str) -> dict[str, Any]:
    name = account.hash_key(table, str(body.get("IndexName") or ""))
    if name is None:
        return {}
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    for attr, placeholder in _KEY_EQUALS.findall(str(body.get("KeyConditionExpression", ""))):
        if names.get(attr, attr) == name and placeholder in values:
            value = _scalar(values[placeholder])
            if value is not None:
                return {"dynamodb:LeadingKeys": (value,)}
    legacy = (body.get("KeyConditions") or {}).get(name, {}).get("AttributeValueList") or []
    value = _scalar(legacy[0]) if legacy else None
    return {"dynamodb:LeadingKeys": (value,)} if value is not None else {}


_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}
_TRANSACT.update({"ConditionCheck": "ConditionCheckItem", "Get": "GetItem"})


def _dynamodb(wire: Wire, account: Account) -> list[Request]:
    target = wire.header("x-amz-target")
    operation = target.rpartition(".")[2]
    body = _json(wire)
    if target.startswith("DynamoDBStreams"):
        return [_stream(operation, body, account)]

    def table_arn(name: str, index: str = "") -> str:
        arn = account.arn("dynamodb", f"table/{name}")
        return f"{arn}/index/{index}" if index else arn

    if operation in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for entry in body.get("TransactItems") or []:
            for kind, op in entry.items():
                table = str(op.get("TableName", ""))
                item = op.get("Item") if kind == "Put" else op.get("Key")
                out.append(
                    Request(
                        f"dynamodb:{_TRANSACT.get(kind, kind)}",
                        table_arn(table),
                        _leading(account, table, [item]),
                    )
                )
        return out
    if operation in ("BatchGetItem", "BatchWriteItem"):
        out = []
        for table, spec in (body.get("RequestItems") or {}).items():
            if operation == "BatchGetItem":
                items = list(spec.get("Keys") or [])
            else:
                items = [
                    (w.get("PutRequest") or {}).get("Item")
                    or (w.get("DeleteRequest") or {}).get("Key")
                    for w in spec
                ]
            out.append(
                Request(f"dynamodb:{operation}", table_arn(table), _leading(account, table, items))
            )
        return out
    table = str(body.get("TableName", ""))
    if not table:
        return [Request(f"dynamodb:{operation}", "*")]
    if operation in ("Query", "Scan"):
        index = str(body.get("IndexName") or "")
        context = _query_leading(account, body, table) if operation == "Query" else {}
        return [Request(f"dynamodb:{operation}", table_arn(table, index), context)]
    item = body.get("Item") if operation == "PutItem" else body.get("Key")
    context = _leading(account, table, [item]) if item is not None else {}
    return [Request(f"dynamodb:{operation}", table_arn(table), context)]


def _stream(operation: str, body: dict[str, Any], account: Account) -> Request:
    arn = body.get("StreamArn") or str(body.get("ShardIterator", "")).split("|")[0]
    return Request(f"dynamodb:{operation}", str(arn or "*"))


# --- SQS, Secrets Manager, EventBridge, STS, IAM ---------------------------------------------
_SQS_BATCH = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def _sqs(wire: Wire, account: Account) -> list[Request]:
    operation = _operation(wire)
    fields: Mapping[str, Any] = _json(wire) if wire.header("x-amz-target") else _form(wire)
    url = str(fields.get("QueueUrl") or "")
    name = url.rstrip("/").rpartition("/")[2] if url else str(fields.get("QueueName") or "")
    if operation == "ListQueues":
        # AWS's SQS permissions reference: ListQueues is authorized on the account's queues
        # as a whole, arn:aws:sqs:region:account_id:* (whatever QueueNamePrefix is given).
        name = "*"
    resource = account.arn("sqs", name) if name else "*"
    return [Request(f"sqs:{_SQS_BATCH.get(operation, operation)}", resource)]


def _secretsmanager(wire: Wire, account: Account) -> list[Request]:
    operation = _operation(wire)
    body = _json(wire)
    secret = str(body.get("SecretId") or body.get("Name") or "")
    if not secret:
        return [Request(f"secretsmanager:{operation}", "*")]
    arn = secret if secret.startswith("arn:") else account.arn("secretsmanager", f"secret:{secret}")
    return [Request(f"secretsmanager:{operation}", arn)]


def _events(wire: Wire, account: Account) -> list[Request]:
    operation = _operation(wire)
    body = _json(wire)
    if operation != "PutEvents":
        return [Request(f"events:{operation}", "*")]
    buses = {str(e.get("EventBusName") or "default") for e in body.get("Entries") or []}
    return [
        Request(
            "events:PutEvents",
            bus if bus.startswith("arn:") else account.arn("events", f"event-bus/{bus}"),
        )
        for bus in sorted(buses)
    ]


def _sts(wire: Wire, account: Account) -> list[Request]:
    fields = _form(wire)
    operation = fields.get("Action", "")
    if operation == "GetCallerIdentity":
        return []  # AWS asks no permission for it
    role = fields.get("RoleArn", "*")
    tags = dict(session_tags(fields))
    context: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    if tags:
        context["aws:TagKeys"] = tuple(tags)
    out = [Request(f"sts:{operation}", role, context)]
    if tags:
        out.append(Request("sts:TagSession", role, context))
    return out


def session_tags(fields: dict[str, str]) -> list[tuple[str, str]]:
    """An STS request's session tags (``Tags.member.N.Key`` / ``.Value``), in order."""
    tags = []
    index = 1
    while f"Tags.member.{index}.Key" in fields:
        tags.append(
            (fields[f"Tags.member.{index}.Key"], fields.get(f"Tags.member.{index}.Value", ""))
        )
        index += 1
    return tags


def _iam(wire: Wire, account: Account) -> list[Request]:
    fields = _form(wire)
    role = fields.get("RoleName")
    resource = account.arn("iam", f"role/{role}", region=False) if role else "*"
    return [Request(f"iam:{fields.get('Action', 'Unknown')}", resource)]


# --- Scheduler -------------------------------------------------------------------------------
def _scheduler(wire: Wire, account: Account) -> list[Request]:
    parts = [p for p in wire.path.split("/") if p]
    verbs = {"POST": "Create", "GET": "Get", "PUT": "Update", "DELETE": "Delete"}
    if parts[:1] == ["schedules"] and len(parts) == 2:
        body = _json(wire)
        group = str(body.get("GroupName") or wire.param("groupName") or "default")
        operation = f"{verbs.get(wire.method, wire.method)}Schedule"
        out = [
            Request(
                f"scheduler:{operation}", account.arn("scheduler", f"schedule/{group}/{parts[1]}")
            )
        ]
        role = (body.get("Target") or {}).get("RoleArn")
        if role and operation in ("CreateSchedule", "UpdateSchedule"):
            passed = {"iam:PassedToService": "scheduler.amazonaws.com"}
            out.append(Request("iam:PassRole", str(role), passed))
        return out
    if parts == ["schedules"]:
        return [Request("scheduler:ListSchedules", "*")]
    if parts[:1] == ["schedule-groups"] and len(parts) == 2:
        operation = f"{verbs.get(wire.method, wire.method)}ScheduleGroup"
        return [
            Request(
                f"scheduler:{operation}", account.arn("scheduler", f"schedule-group/{parts[1]}")
            )
        ]
    return [Request(f"scheduler:{wire.method}{wire.path}", "*")]


# --- S3 --------------------------------------------------------------------------------------
_BUCKET_PUT = {
    "lifecycle": "PutLifecycleConfiguration",
    "encryption": "PutEncryptionConfiguration",
    "publicAccessBlock": "PutBucketPublicAccessBlock",
    "policy": "PutBucketPolicy",
    "tagging": "PutBucketTagging",
    "cors": "PutBucketCORS",
    "notification": "PutBucketNotification",
    "versioning": "PutBucketVersioning",
}
_BUCKET_GET = {
    "location": "GetBucketLocation",
    "lifecycle": "GetLifecycleConfiguration",
    "encryption": "GetEncryptionConfiguration",
    "publicAccessBlock": "GetBucketPublicAccessBlock",
    "policy": "GetBucketPolicy",
    "tagging": "GetBucketTagging",
    "versions": "ListBucketVersions",
    "uploads": "ListBucketMultipartUploads",
}


def _s3(wire: Wire, account: Account) -> list[Request]:
    bucket, _, key = wire.path.lstrip("/").partition("/")
    bucket_arn = f"arn:aws:s3:::{bucket}"
    sub = set(wire.query)
    if not bucket:
        return [Request("s3:ListAllMyBuckets", "*")]
    if not key:
        return _s3_bucket(wire, bucket_arn, sub)
    object_arn = f"{bucket_arn}/{unquote(key)}"
    method = wire.method
    if method in ("GET", "HEAD"):
        action = "GetObjectTagging" if "tagging" in sub else "GetObject"
        if "versionId" in sub and action == "GetObject":
            action = "GetObjectVersion"
        return [Request(f"s3:{action}", object_arn)]
    if method == "PUT":
        if "tagging" in sub:
            return [Request("s3:PutObjectTagging", object_arn)]
        out = [Request("s3:PutObject", object_arn)]
        if wire.header("x-amz-tagging"):
            out.append(Request("s3:PutObjectTagging", object_arn))
        source = wire.header("x-amz-copy-source")
        if source:
            out.append(Request("s3:GetObject", f"arn:aws:s3:::{unquote(source).lstrip('/')}"))
        return out
    if method == "POST":
        return [Request("s3:PutObject", object_arn)]  # multipart create / complete
    if method == "DELETE":
        if "uploadId" in sub:
            return [Request("s3:AbortMultipartUpload", object_arn)]
        action = "DeleteObjectTagging" if "tagging" in sub else "DeleteObject"
        return [Request(f"s3:{action}", object_arn)]
    return [Request(f"s3:{method}Object", object_arn)]


def _s3_bucket(wire: Wire, bucket_arn: str, sub: set[str]) -> list[Request]:
    method = wire.method
    if method == "POST" and "delete" in sub:
        keys = re.findall(rb"<Key>(.*?)</Key>", wire.body or b"")
        return [Request("s3:DeleteObject", f"{bucket_arn}/{_xml_text(k)}") for k in keys] or [
            Request("s3:DeleteObject", f"{bucket_arn}/*")
        ]
    known = {"PUT": _BUCKET_PUT, "GET": _BUCKET_GET}.get(method, {})
    for name, action in known.items():
        if name in sub:
            return [Request(f"s3:{action}", bucket_arn)]
    if method in ("GET", "HEAD"):
        context: dict[str, Any] = {}
        for param in ("prefix", "delimiter", "max-keys"):
            value = wire.param(param)
            if value is not None:
                context[f"s3:{param}"] = value
        return [Request("s3:ListBucket", bucket_arn, context)]
    if method == "PUT" and not sub:
        return [Request("s3:CreateBucket", bucket_arn)]
    if method == "DELETE" and not sub:
        return [Request("s3:DeleteBucket", bucket_arn)]
    return [Request(f"s3:{method}Bucket{''.join(sorted(sub))}", bucket_arn)]


def _xml_text(raw: bytes) -> str:
    text = raw.decode(errors="replace")
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'")):
        text = text.replace(entity, char)
    return text.replace("&amp;", "&")


_READERS = {
    "dynamodb": _dynamodb,
    "sqs": _sqs,
    "s3": _s3,
    "secretsmanager": _secretsmanager,
    "events": _events,
    "sts": _sts,
    "iam": _iam,
    "scheduler": _scheduler,
}
