"""AWS adapters of completion notifications: the webhook queue (SQS), the event bus
(EventBridge) and the tenants' signing secrets (Secrets Manager)."""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.notify.signing import new_secret

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient

# SQS hides a message for at most 12 hours.
MAX_VISIBILITY_S = 12 * 3600


class SqsWebhookQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, message: dict[str, Any]) -> None:
        self._sqs.send_message(QueueUrl=self._url, MessageBody=json.dumps(message))

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=max(0, min(seconds, MAX_VISIBILITY_S)),
        )


class EventBridgeBus:
    def __init__(self, client: EventBridgeClient, bus_name: str = "default") -> None:
        self._events = client
        self._bus = bus_name

    def put(self, *, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        resp = self._events.put_events(
            Entries=[
                {
                    "Source": source,
                    "DetailType": detail_type,
                    "Detail": json.dumps(detail),
                    "EventBusName": self._bus,
                }
            ]
        )
        if resp.get("FailedEntryCount"):
            entry = (resp.get("Entries") or [{}])[0]
            code, text = entry.get("ErrorCode"), entry.get("ErrorMessage")
            raise RuntimeError(f"EventBridge refused the event: {code} {text}")


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
