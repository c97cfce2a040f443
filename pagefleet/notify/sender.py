"""Completion webhooks, second half: one signed POST per queue message, retried with backoff.

The URL passes the egress policy again at send time (it was checked at submit, but DNS can
change): every address the host resolves to must be allowed, and the request goes to one of
those checked addresses (Host header and TLS name kept), so a second lookup cannot send it
elsewhere. Redirects are not followed. A 2xx answer is a delivery; anything else is retried
with exponential backoff (with jitter) until the queue's receive limit sends the message to
its dead-letter queue. Every attempt is recorded (``GET /v1/jobs/{id}/deliveries``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from pagefleet.backoff import Backoff, Jitter
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock
from pagefleet.notify.ports import Deliveries, DeliveryAttempt, SigningSecrets
from pagefleet.notify.signing import HEADER, sign
from pagefleet.notify.webhooks import EVENT_NAME
from pagefleet.targets.egress_policy import (
    CheckedTarget,
    EgressPolicy,
    EgressRefused,
    SyncResolver,
    check_url,
)

USER_AGENT = "pagefleet-webhooks/1"
ERROR_MAX_CHARS = 300


@dataclass(frozen=True)
class WebhookMessage:
    tenant_id: str
    job_id: str
    delivery_id: str
    url: str
    job_status: str
    expires_at: int
    body: str
    event: str = EVENT_NAME  # messages queued before events had names were all this

    @classmethod
    def parse(cls, text: str) -> WebhookMessage:
        data = json.loads(text)
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class SendResult:
    attempt: DeliveryAttempt
    # Seconds until the next try; None: no retry (delivered, refused, or out of attempts).
    retry_in_s: int | None


# Equal jitter: a receiver that is down is not tried again much sooner than the ceiling.
WEBHOOK_BACKOFF = Backoff(10.0, 3600.0, Jitter.EQUAL)


def backoff_s(backoff: Backoff, attempt: int, rng: random.Random | None = None) -> int:
    """Whole seconds, at least one: the queue message's visibility timeout."""
    return max(1, round(backoff.delay(attempt, rng)))


class WebhookSender:
    def __init__(
        self,
        secrets: SigningSecrets,
        deliveries: Deliveries,
        *,
        policy: EgressPolicy,
        resolve: SyncResolver,
        http: httpx.Client,
        max_attempts: int,
        backoff: Backoff = WEBHOOK_BACKOFF,
        timeout_s: float = 5.0,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.secrets = secrets
        self.deliveries = deliveries
        self.policy = policy
        self.resolve = resolve
        self.http = http
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.timeout_s = timeout_s
        self.clock = clock
        self.rng = rng

    def send(self, message: WebhookMessage, *, attempt: int) -> SendResult:
        started = self.clock.now()
        code: int | None = None
        error: str | None = None
        try:
            target = check_url(message.url, self.policy, self.resolve)
        except EgressRefused as refused:
            if not refused.transient:
                return self._result(message, attempt, started, "refused", None, refused.reason)
            error = refused.reason
        else:
            secret = self.secrets.get(message.tenant_id)
            try:
                code = self._post(target, message, secret, attempt, int(started))
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]
        if code is not None and 200 <= code < 300:
            return self._result(message, attempt, started, "delivered", code, None)
        if code is not None:
            error = f"the receiver answered {code}" + (
                " (redirects are not followed)" if 300 <= code < 400 else ""
            )
        return self._result(message, attempt, started, "failed", code, error)

    def _post(
        self, target: CheckedTarget, message: WebhookMessage, secret: str, attempt: int, t: int
    ) -> int:
        body = message.body.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            HEADER: sign(secret, t, body),
            "Pagefleet-Delivery": message.delivery_id,
            "Pagefleet-Event": message.event,
            "Pagefleet-Attempt": str(attempt),
        }
        last: httpx.HTTPError | None = None
        for address in target.addresses:
            pinned = httpx.URL(message.url).copy_with(host=address)
            default_port = 443 if target.scheme == "https" else 80
            headers["Host"] = (
                target.host if target.port == default_port else f"{target.host}:{target.port}"
            )
            extensions: dict[str, Any] = {}
            if target.scheme == "https":
                extensions["sni_hostname"] = target.host
            try:
                with self.http.stream(
                    "POST",
                    pinned,
                    content=body,
                    headers=headers,
                    timeout=self.timeout_s,
                    follow_redirects=False,
                    extensions=extensions,
                ) as response:
                    return response.status_code  # the body is never read
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last = exc  # the next checked address, if any
        assert last is not None
        raise last

    def _result(
        self,
        message: WebhookMessage,
        attempt: int,
        started: float,
        status: str,
        code: int | None,
        error: str | None,
    ) -> SendResult:
        retry: int | None = None
        if status == "failed" and attempt < self.max_attempts:
            retry = backoff_s(self.backoff, attempt, self.rng)
        elif status == "failed":
            error = f"{error}; giving up after {attempt} attempts (dead-letter queue)"
        record = DeliveryAttempt(
            delivery_id=message.delivery_id,
            attempt=attempt,
            at=datetime.fromtimestamp(started, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            url=message.url,
            status=status,
            status_code=code,
            error=error,
            duration_ms=max(0, round((self.clock.now() - started) * 1000)),
            next_attempt_in_s=retry,
            job_status=message.job_status,
            event=message.event,
        )
        self.deliveries.record(
            message.tenant_id, message.job_id, record, expires_at=message.expires_at
        )
        return SendResult(record, retry)


def receive_count(record: Mapping[str, Any]) -> int:
    """The attempt number of an SQS record (its ApproximateReceiveCount)."""
    try:
        return max(1, int((record.get("attributes") or {}).get("ApproximateReceiveCount", 1)))
    except (TypeError, ValueError):
        return 1
