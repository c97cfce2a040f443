"""AWS adapters of completion notifications: the webhook queue (SQS), the event bus
(EventBridge) and the tenants' signing secrets (Secrets Manager)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from pagefleet.jobs.ports import SQS_BATCH_MAX
from pagefleet.notify.ports import BusEvent
from pagefleet.notify.signing import new_secret

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient

# SQS hides a message for at most 12 hours.
MAX_VISIBILITY_S = 12 * 3600
# A message, and a batch's messages together, are at most 256 KiB.
SQS_MAX_BYTES = 262_144
# EventBridge's PutEvents takes at most 10 entries a request.
PUT_EVENTS_MAX = 10


class SqsWebhookQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send_many(self, messages: Sequence[dict[str, Any]]) -> list[str | None]:
        bodies = [json.dumps(m) for m in messages]
        told: list[str | None] = []
        for chunk in _send_batches(bodies):
            try:
                resp = self._sqs.send_message_batch(
                    QueueUrl=self._url,
                    Entries=[{"Id": str(n), "MessageBody": bodies[n]} for n in chunk],
                )
            except (ClientError, BotoCoreError) as exc:
                # The batches before were sent: only this one and those after are not.
                return told + [f"not sent: {exc}"] * (len(bodies) - len(told))
            failed = {
                f["Id"]: f"{f.get('Code')} {f.get('Message')}" for f in resp.get("Failed", [])
            }
            told += [failed.get(str(n)) for n in chunk]
        return told

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=max(0, min(seconds, MAX_VISIBILITY_S)),
        )


def _send_batches(bodies: list[str]) -> list[list[int]]:
    """``bodies``' indexes in order, in batches SQS takes: ten at most, their bytes together
    within a message's limit (one larger than it goes alone, and is refused alone)."""
    batches: list[list[int]] = []
    size = 0
    for n, body in enumerate(bodies):
        length = len(body.encode())
        if not batches or len(batches[-1]) >= SQS_BATCH_MAX or size + length > SQS_MAX_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(n)
        size += length
    return batches


class EventBridgeBus:
    def __init__(self, client: EventBridgeClient, bus_name: str = "default") -> None:
        self._events = client
        self._bus = bus_name

    def put_many(self, events: Sequence[BusEvent]) -> list[str | None]:
        told: list[str | None] = []
        for first in range(0, len(events), PUT_EVENTS_MAX):
            chunk = events[first : first + PUT_EVENTS_MAX]
            try:
                resp = self._events.put_events(Entries=[self._entry(e) for e in chunk])
            except (ClientError, BotoCoreError) as exc:
                # The chunks before were accepted: only this one and those after are not.
                return told + [f"not put: {exc}"] * (len(events) - len(told))
            # One result per entry, in order: an EventId, or ErrorCode and ErrorMessage.
            results = list(resp.get("Entries") or [])
            for n in range(len(chunk)):
                result: Any = results[n] if n < len(results) else {}
                if result.get("EventId") and not result.get("ErrorCode"):
                    told.append(None)
                else:
                    told.append(f"{result.get('ErrorCode')} {result.get('ErrorMessage')}")
        return told

    def _entry(self, event: BusEvent) -> Any:
        return {
            "Source": event.source,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.detail),
            "EventBusName": self._bus,
        }


def signing_secret_id(stage: str, tenant_id: str) -> str:
    # Outside pagefleet/<stage>/<tenant>/ (the tenant's {{secrets.NAME}}): a workflow can
    # never read it, and the worker's role never reaches it.
    return f"pagefleet-webhooks/{stage}/{tenant_id}"


class SecretsManagerSigningSecrets:
    """One secret per tenant, created on first use; values cached briefly per process."""

    CACHE_S = 60.0

    def __init__(self, client: SecretsManagerClient, stage: str) -> None:
        self._client = client
        self._stage = stage
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def get(self, tenant_id: str) -> str:
        with self._lock:
            cached = self._cache.get(tenant_id)
        if cached is not None and time.monotonic() - cached[0] < self.CACHE_S:
            return cached[1]
        secret_id = signing_secret_id(self._stage, tenant_id)
        try:
            value = str(self._client.get_secret_value(SecretId=secret_id)["SecretString"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            value = self._create(secret_id)
        return self._remember(tenant_id, value)

    def stored(self, tenant_id: str) -> str | None:
        """The tenant's secret as stored, or None: never made here (an operator reading a
        stage's secret must not mint one the API has not handed out)."""
        try:
            return str(
                self._client.get_secret_value(SecretId=signing_secret_id(self._stage, tenant_id))[
                    "SecretString"
                ]
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            return None

    def rotate(self, tenant_id: str) -> str:
        secret_id = signing_secret_id(self._stage, tenant_id)
        value = new_secret()
        try:
            self._client.put_secret_value(SecretId=secret_id, SecretString=value)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            value = self._create(secret_id, value)
        return self._remember(tenant_id, value)

    def _create(self, secret_id: str, value: str | None = None) -> str:
        value = value or new_secret()
        try:
            self._client.create_secret(
                Name=secret_id,
                SecretString=value,
                Description="pagefleet webhook signing secret (Pagefleet-Signature)",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceExistsException":
                raise
            # Made by a concurrent first use: everyone signs with the stored one.
            return str(self._client.get_secret_value(SecretId=secret_id)["SecretString"])
        return value

    def _remember(self, tenant_id: str, value: str) -> str:
        with self._lock:
            self._cache[tenant_id] = (time.monotonic(), value)
        return value
