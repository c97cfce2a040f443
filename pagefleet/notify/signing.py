"""Webhook signatures: ``Pagefleet-Signature: t=<unix time>,v1=<hex HMAC-SHA256>``.

The HMAC is over ``"<t>." + body`` with the tenant's signing secret, so a receiver can check
both who sent the request and when (refuse an old ``t`` to stop replays). ``verify`` is what
a receiver runs; the README shows the same few lines.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "Pagefleet-Signature"
SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
DEFAULT_TOLERANCE_S = 300


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Pagefleet-Signature`` header value for ``body`` sent at ``timestamp``."""
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(
    secret: str,
    header: str,
    body: bytes,
    *,
    now: float,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """True if ``header`` signs ``body`` with ``secret`` and is at most ``tolerance_s`` old."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = signature(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in parts.get("v1", []))
